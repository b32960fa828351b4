// The processes of a job as /proc shows them: a root and, for a tree job,
// every descendant, parents before their children.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <string>
#include <vector>

namespace ckpt::proc {

struct Member {
  pid_t pid = 0, ppid = 0, pgid = 0, sid = 0;
  bool zombie = false;
  bool ctty = false;    // has a controlling terminal (/proc/PID/stat tty_nr)
  int exit_status = 0;  // a zombie's wait status
};

// `root` and, with `tree`, all its descendants in pre-order (each parent
// before its children, children by PID). Without `tree`, a root that has
// children is refused by name: they would be lost.
Result<std::vector<Member>> list_job(pid_t root, bool tree);

// `e` naming member `pid` when the job has several (a job of one keeps the
// single-process messages).
inline Error name_member(const Error& e, pid_t pid, size_t members) {
  return members > 1 ? e.context("PID " + std::to_string(pid)) : e;
}

// Who left or joined a job between two lists of its members, for a
// message: "PID 12 left the job, PID 40 (make) joined it"; empty if the
// same processes.
std::string membership_change(const std::vector<pid_t>& was, const std::vector<pid_t>& now);

// The children of `pid` (of all its threads), ascending.
std::vector<pid_t> children_of(pid_t pid);

}  // namespace ckpt::proc
