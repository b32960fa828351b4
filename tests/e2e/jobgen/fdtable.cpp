#include "fdtable.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "sys.hpp"

namespace jobgen {

namespace {

std::string kind_of(int fd) {
  char buf[512];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n < 0) return "?";
  std::string s(buf, size_t(n));
  if (s.rfind("pipe:", 0) == 0) return "pipe";
  if (s.rfind("socket:", 0) == 0) {
    int dom = 0, type = 0;
    socklen_t l = sizeof dom;
    ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l);
    l = sizeof type;
    ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l);
    return "socket " + std::to_string(dom) + "/" + std::to_string(type);
  }
  // A pty slave may come back under another number.
  if (s.rfind("/dev/pts/", 0) == 0) return "/dev/pts/*";
  return s;
}

}  // namespace

std::vector<FdEntry> fd_table() {
  std::vector<FdEntry> out;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) die_errno("opendir /proc/self/fd");
  const int own = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = std::atoi(e->d_name);
    if (fd == own) continue;
    out.push_back({fd, kind_of(fd), ::fcntl(fd, F_GETFD),
                   ::fcntl(fd, F_GETFL) & (O_ACCMODE | O_NONBLOCK | O_APPEND)});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const FdEntry& a, const FdEntry& b) { return a.fd < b.fd; });
  return out;
}

void compare_fd_tables(const std::vector<FdEntry>& before, const std::vector<FdEntry>& all_after) {
  // The pagemap-scan tracker keeps its userfaultfd in the process it tracks
  // (docs/architecture.md); the job itself never makes one.
  std::vector<FdEntry> after;
  for (const FdEntry& e : all_after)
    if (e.what != "anon_inode:[userfaultfd]") after.push_back(e);
  size_t i = 0, j = 0;
  while (i < before.size() || j < after.size()) {
    if (j == after.size() || (i < before.size() && before[i].fd < after[j].fd))
      die("fd " + std::to_string(before[i].fd) + " (" + before[i].what + ") is gone");
    if (i == before.size() || after[j].fd < before[i].fd)
      die("fd " + std::to_string(after[j].fd) + " (" + after[j].what + ") appeared");
    const FdEntry &a = before[i], &b = after[j];
    if (a.what != b.what) die("fd " + std::to_string(a.fd) + " was " + a.what + ", is " + b.what);
    if (a.fd_flags != b.fd_flags)
      die("fd " + std::to_string(a.fd) + " (" + a.what + "): FD_CLOEXEC changed");
    if (a.fl_flags != b.fl_flags)
      die("fd " + std::to_string(a.fd) + " (" + a.what + "): status flags " +
          std::to_string(a.fl_flags) + " became " + std::to_string(b.fl_flags));
    ++i, ++j;
  }
}

void check_shared(int a, int b, const char* what) {
  int fa = ::fcntl(a, F_GETFL);
  set_nonblock(a, !(fa & O_NONBLOCK));
  int fb = ::fcntl(b, F_GETFL);
  set_nonblock(a, fa & O_NONBLOCK);
  if ((fb & O_NONBLOCK) == (fa & O_NONBLOCK))
    die(std::string(what) + ": fd " + std::to_string(a) + " and its dup " + std::to_string(b) +
        " no longer share their open file");
}

}  // namespace jobgen
