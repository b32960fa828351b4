// Signal state of a frozen process: blocked mask and ignored set come from
// /proc/PID/status; handlers have no /proc or ptrace interface, so they are
// read by rt_sigaction() calls injected into the target.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

#include "image/model.hpp"
#include "proc/inject.hpp"

namespace ckpt::proc {

struct SignalMasks {
  uint64_t blocked = 0, ignored = 0, caught = 0;
};
// The masks of one thread (SigBlk) and of the process (SigIgn, SigCgt).
Result<SignalMasks> read_signal_masks(pid_t pid, pid_t tid);

// The dispositions `masks` tells by itself: the ignored signals.
std::vector<image::SignalAction> ignored_sigactions(const SignalMasks& masks);

// Appends the handlers of the signals in `caught`, read by rt_sigaction()
// calls injected through `rs` into the frozen leader, answers into `scratch`
// (32 bytes). read_task_states runs it in its session of injected calls.
Status read_handlers(RemoteSyscall& rs, uint64_t scratch, uint64_t caught,
                     std::vector<image::SignalAction>* out);

}  // namespace ckpt::proc
