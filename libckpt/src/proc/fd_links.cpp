#include "proc/fd_links.hpp"

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "util/text.hpp"

namespace ckpt::proc {

std::vector<FdLink> fd_links(pid_t pid) {
  std::vector<FdLink> out;
  const std::string dir = proc_path(pid, "fd");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char link[4096];
    ssize_t n = ::readlink((dir + "/" + e->d_name).c_str(), link, sizeof link);
    if (n > 0) out.push_back({std::atoi(e->d_name), std::string(link, size_t(n))});
  }
  ::closedir(d);
  return out;
}

Result<UniqueFd> take_fd(pid_t pid, int fd) {
  UniqueFd pidfd(int(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) return sys_error("pidfd_open " + std::to_string(pid));
  UniqueFd copy(int(::syscall(SYS_pidfd_getfd, pidfd.get(), fd, 0)));
  if (!copy.valid()) return sys_error("pidfd_getfd of the target's fd " + std::to_string(fd));
  return copy;
}

}  // namespace ckpt::proc
