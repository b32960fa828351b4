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

// Fills the kernel-held fields of `t` (t->tid set, thread in a ptrace stop).
Status read_thread_state(pid_t pid, image::ThreadRecord* t);

// Process-wide state; `leader` is in a ptrace stop.
Status read_process_state(pid_t pid, image::ProcessState* out);

}  // namespace ckpt::proc
