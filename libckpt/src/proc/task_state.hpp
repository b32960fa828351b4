// Thread and process state that lives in the kernel rather than in memory:
// alternate signal stacks, TID addresses, robust futex lists, queued signals,
// seccomp filters, timers, limits and prctl flags. Read from a frozen target
// (ptrace requests, /proc, and calls injected into the target where the
// kernel offers no other way), for the image model.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>

#include "image/model.hpp"

namespace ckpt::proc {

// Fills the kernel-held fields of every thread in `threads` (tids set, all
// in a ptrace stop; the leader first) and the process-wide `state`, in one
// session of injected calls sharing one scratch page.
Status read_task_states(pid_t pid, std::vector<image::ThreadRecord>* threads,
                        image::ProcessState* state);

}  // namespace ckpt::proc
