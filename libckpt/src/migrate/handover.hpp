// The handover of a restored process at the end of a migration: how the
// connection handler, when the monitor that held the process dies, learns
// from the kernel whether that process runs, so that it tells the sender
// the truth (docs/security.md, "A receiver killed after COMMIT").
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>

#include "util/fd.hpp"

namespace ckpt::migrate {

// What /proc/PID/status and /proc/PID/stat say of a held process's leader.
struct HeldState {
  bool exiting = false;       // State Z or X, or PF_EXITING / PF_SIGNALED in its flags
  bool traced = false;        // TracerPid is not 0
  bool kill_pending = false;  // SIGKILL in SigPnd or ShdPnd
};
bool parse_held_state(const char* status, const char* stat, HeldState* out);

// The leader's status and stat, opened by the monitor while it still holds
// the process: the sandboxed handler can read them (no open of its own).
struct HeldProcess {
  UniqueFd status, stat;
};
Result<HeldProcess> open_held(pid_t pid);

// Once the monitor is dead: whether the process it held runs. A tracer's
// death first closes its descriptors (the handler sees that) and only then
// lets its tracees go, sending SIGKILL first to those set to die with it.
// So this waits until the leader has no tracer, then answers: it runs if it
// still exists, is not exiting and has no SIGKILL pending. A dying thread
// takes its SIGKILL off the pending set a moment before its flags say so;
// status is read before stat, and a "runs" is read again 20 ms later. The
// leader is released last, so a free leader means every thread was. Still
// traced after `timeout_seconds`: it dies with its tracer (false).
bool held_process_runs(const HeldProcess& held, double timeout_seconds);

}  // namespace ckpt::migrate
