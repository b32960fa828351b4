#include "restore/user_access.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "notify/inotify.hpp"
#include "util/fd.hpp"

namespace ckpt::restore {

namespace {

struct Need {
  std::string path, what;
  int mode;  // R_OK | W_OK | X_OK
};

int access_of(uint32_t open_flags) {
  switch (open_flags & O_ACCMODE) {
    case O_WRONLY:
      return W_OK;
    case O_RDWR:
      return R_OK | W_OK;
    default:
      return R_OK;
  }
}

std::vector<Need> needs_of(const image::ImageMeta& meta, const std::set<std::string>& recreated) {
  std::vector<Need> out;
  auto add = [&](const std::string& path, const std::string& what, int mode) {
    if (!path.empty() && path[0] == '/' && !recreated.count(path))
      out.push_back({path, what, mode});
  };
  for (const image::FileRecord& f : meta.files) {
    if (f.dup_of != -1) continue;
    const std::string what = "fd " + std::to_string(f.fd);
    switch (f.kind) {
      case image::FileKind::kRegular:
      case image::FileKind::kFifo:
      case image::FileKind::kCharDevice:
        add(f.path, what, access_of(f.flags));
        break;
      case image::FileKind::kInotify:
        // A malformed record is the preparer's to refuse.
        if (auto watches = notify::load_watches(f, what); watches.ok())
          for (const notify::Watch& w : *watches)
            add(w.path, what + ": watch " + std::to_string(w.wd), R_OK);
        break;
      default:  // made anew (pipes, sockets, deleted files...), not opened by path
        break;
    }
  }
  for (const image::VmaRecord& v : meta.vmas) {
    if (!v.is_file() || v.is_special() || (v.flags & (image::kVmaSysv | image::kVmaDelShared)))
      continue;
    const bool writes_file = (v.flags & image::kVmaShared) && (v.prot & PROT_WRITE);
    add(v.name, "mapping of " + v.name, R_OK | (writes_file ? W_OK : 0));
  }
  if (!meta.process.cwd.ends_with(" (deleted)"))  // a removed one is made anew
    add(meta.process.cwd, "working directory", X_OK);
  // What the restore makes where nothing is (a file saved from a temporary
  // directory, its directories): only where the process's user could make
  // it, in the nearest directory that exists. What exists is checked by
  // owner where it is written (restore/scratch).
  for (const image::ScratchFile& f : meta.scratch) {
    struct stat st;
    if ((f.flags & image::kScratchNotSaved) || f.path.empty() || f.path[0] != '/' ||
        ::lstat(f.path.c_str(), &st) == 0)
      continue;
    std::string dir = f.path;
    do dir = dir.substr(0, std::max<size_t>(dir.rfind('/'), 1));
    while (dir != "/" && ::lstat(dir.c_str(), &st) != 0);
    out.push_back({dir, "scratch file " + f.path + " (to be made in " + dir + ")", W_OK | X_OK});
  }
  return out;
}

}  // namespace

Status check_user_access(const image::ImageMeta& meta, const std::set<std::string>& recreated) {
  if (meta.credentials.empty()) return {};  // refused earlier for a user's images
  const image::TaskCredentials& c = meta.credentials.front();
  const std::vector<Need> needs = needs_of(meta, recreated);
  if (needs.empty()) return {};
  const std::vector<gid_t> groups(c.groups.begin(), c.groups.end());
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return sys_error("checking file access: pipe");
  UniqueFd rd(p[0]), wr(p[1]);
  const pid_t kid = ::fork();
  if (kid < 0) return sys_error("checking file access: fork");
  if (kid == 0) {
    // Only system calls from here (the restorer may have threads).
    int answer[2] = {-1, 0};  // index of the first refused path, its errno
    const uid_t u = c.uid[3];
    const gid_t g = c.gid[3];
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setresgid(g, g, g) != 0 ||
        ::setresuid(u, u, u) != 0) {
      answer[0] = -2;
      answer[1] = errno;
    } else {
      for (size_t i = 0; i < needs.size(); ++i) {
        if (::faccessat(AT_FDCWD, needs[i].path.c_str(), needs[i].mode, AT_EACCESS) == 0) continue;
        if (errno != EACCES && errno != EPERM) continue;  // missing: the restore says so
        answer[0] = int(i);
        answer[1] = errno;
        break;
      }
    }
    (void)!::write(wr.get(), answer, sizeof answer);
    ::_exit(0);
  }
  wr.reset();
  int answer[2] = {-3, 0};
  ssize_t n;
  do n = ::read(rd.get(), answer, sizeof answer);
  while (n < 0 && errno == EINTR);
  int status = 0;
  while (::waitpid(kid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != ssize_t(sizeof answer) || answer[0] == -3)
    return make_error(EIO, "checking file access as uid " + std::to_string(c.uid[3]) + " failed");
  if (answer[0] == -2)
    return make_error(answer[1], "checking file access: cannot take uid " +
                                     std::to_string(c.uid[3]) + ": " + std::strerror(answer[1]));
  if (answer[0] < 0) return {};
  const Need& bad = needs[size_t(answer[0])];
  return make_error(EACCES, bad.what + ": uid " + std::to_string(c.uid[3]) + " could not open " +
                                bad.path + " (" + std::strerror(answer[1]) +
                                "), and the restore would open it for the process");
}

}  // namespace ckpt::restore
