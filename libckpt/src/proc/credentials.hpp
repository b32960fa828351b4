// A thread's credentials and scheduling, read from outside with what /proc
// and the sched_* calls give any tracer (no capability asked for):
// /proc/PID/task/TID/status for uids, gids, groups, capabilities and
// no_new_privs; sched_getscheduler/getparam/getaffinity and getpriority
// for scheduling. Securebits have no such interface: read_task_states reads
// them with an injected prctl (see credentials_need_securebits).
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "image/model.hpp"

namespace ckpt::proc {

// One record per thread, in `threads` order. Refuses what cannot be restored
// by name: SCHED_DEADLINE, a NUMA memory policy (thread or mapping).
Result<std::vector<image::TaskCredentials>> read_credentials(
    pid_t pid, const std::vector<image::ThreadRecord>& threads);

// Parses the credential fields of a /proc/.../status text into `c`.
Status parse_status_credentials(const std::string& status, image::TaskCredentials* c);

// Whether securebits can matter enough to inject a call to read them: a
// thread with a uid 0 or a capability beyond the bounding set. (Without
// capabilities and root, securebits only govern setuid-root executables;
// docs/security.md says what a restore does when they were not read.)
bool credentials_need_securebits(const std::vector<image::TaskCredentials>& creds);

}  // namespace ckpt::proc
