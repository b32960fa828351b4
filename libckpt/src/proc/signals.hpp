// Signal state of a frozen process: blocked mask and ignored set come from
// /proc/PID/status; handlers have no /proc or ptrace interface, so they are
// read by rt_sigaction() calls injected into the target.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <ckpt/result.hpp>
#include <vector>

#include "image/model.hpp"

namespace ckpt::proc {

struct SignalMasks {
  uint64_t blocked = 0, ignored = 0, caught = 0;
};
// The masks of one thread (SigBlk) and of the process (SigIgn, SigCgt).
Result<SignalMasks> read_signal_masks(pid_t pid, pid_t tid);

// Every non-default disposition. `captured` are the thread's registers at the
// freeze stop; when handlers must be queried, the thread runs injected calls
// and is left with live_resume_registers(captured).
Result<std::vector<image::SignalAction>> dump_sigactions(pid_t tid,
                                                         const user_regs_struct& captured,
                                                         const SignalMasks& masks);

}  // namespace ckpt::proc
