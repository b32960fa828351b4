// Signal state of a frozen process: blocked mask and ignored set come from
// /proc/PID/status; handlers have no /proc or ptrace interface, so they are
// read by rt_sigaction() calls injected into the target.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

#include "image/model.hpp"

namespace ckpt::proc {

struct SignalMasks {
  uint64_t blocked = 0, ignored = 0, caught = 0;
};
// The masks of one thread (SigBlk) and of the process (SigIgn, SigCgt).
Result<SignalMasks> read_signal_masks(pid_t pid, pid_t tid);

// Every non-default disposition. Handlers are read by calls injected into
// the (frozen) thread, which resumes afterwards as the kernel would have let
// it (see with_injected_calls).
Result<std::vector<image::SignalAction>> dump_sigactions(pid_t tid, const SignalMasks& masks);

}  // namespace ckpt::proc
