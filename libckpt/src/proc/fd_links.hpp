// A process's open fds as /proc/PID/fd shows them: number and link target.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "util/fd.hpp"

namespace ckpt::proc {

struct FdLink {
  int fd;
  std::string target;  // "socket:[123]", "pipe:[45]", "/dev/ptmx", a path...
};

// Empty when the process is gone or unreadable; fds closed meanwhile are skipped.
std::vector<FdLink> fd_links(pid_t pid);

// A copy of process `pid`'s descriptor `fd` in this process (pidfd_getfd).
Result<UniqueFd> take_fd(pid_t pid, int fd);

}  // namespace ckpt::proc
