// The processes of a job as /proc shows them: a root and, for a tree job,
// every descendant, parents before their children.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

namespace ckpt::job {

struct Member {
  pid_t pid = 0, ppid = 0, pgid = 0, sid = 0;
  bool zombie = false;
  int exit_status = 0;  // a zombie's wait status
};

// `root` and, with `tree`, all its descendants in pre-order (each parent
// before its children, children by PID). Without `tree`, a root that has
// children is refused by name: they would be lost.
Result<std::vector<Member>> list_job(pid_t root, bool tree);

// The children of `pid` (of all its threads), ascending.
std::vector<pid_t> children_of(pid_t pid);

}  // namespace ckpt::job
