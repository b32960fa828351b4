#include <fcntl.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "notify/inotify.hpp"

namespace ckpt::notify {

namespace {

// An instance gives watch descriptors in increasing order and does not give
// a removed one again soon, so a watch added and removed moves the next
// one up by one.
Status add_as(int fd, const Watch& w, const std::string& what) {
  // The handle named this very file: a symbolic link is watched itself.
  const uint32_t mask = w.mask | IN_DONT_FOLLOW;
  for (;;) {
    int wd = ::inotify_add_watch(fd, w.path.c_str(), mask);
    if (wd < 0) return sys_error(what + ": watching " + w.path);
    if (wd == w.wd) return {};
    if (wd > w.wd)
      return make_error(EEXIST, what + ": " + w.path + " got watch " + std::to_string(wd) +
                                    ", not " + std::to_string(w.wd) +
                                    " (watched twice, or the same file under two names)");
    if (::inotify_rm_watch(fd, wd) != 0)
      return sys_error(what + ": skipping watch " + std::to_string(wd));
  }
}

// The IN_IGNORED events of the watches removed on the way: the program
// never had those watches.
void drain(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  alignas(inotify_event) char buf[4096];
  while (::read(fd, buf, sizeof buf) > 0) {
  }
  ::fcntl(fd, F_SETFL, fl);
}

}  // namespace

Result<UniqueFd> restore_inotify(const image::FileRecord& f, const std::string& what) {
  CKPT_ASSIGN(std::vector<Watch> watches, load_watches(f, what));
  UniqueFd fd(::inotify_init1(IN_CLOEXEC | ((f.flags & O_NONBLOCK) ? IN_NONBLOCK : 0)));
  if (!fd.valid()) return sys_error("creating " + what);
  for (const Watch& w : watches) CKPT_TRY(add_as(fd.get(), w, what));
  if (!watches.empty() && watches.back().wd != int32_t(watches.size())) drain(fd.get());
  return fd;
}

}  // namespace ckpt::notify
