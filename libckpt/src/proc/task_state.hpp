// Thread and process state that lives in the kernel rather than in memory:
// alternate signal stacks, TID addresses, robust futex lists, queued signals,
// seccomp filters, timers, limits and prctl flags. Read from a frozen target
// (ptrace requests, /proc, and calls injected into the target where the
// kernel offers no other way), for the image model.
#pragma once

#include <sys/types.h>

#include <array>
#include <ckpt/result.hpp>
#include <string>

#include "image/model.hpp"

namespace ckpt::proc {

// Fills the kernel-held fields of every thread in `threads` (tids set, all
// in a ptrace stop; the leader first) and the process-wide `state`, in one
// session of injected calls sharing one scratch page.
// `creds` (from read_credentials, same order as `threads`) get their
// securebits when calls are injected anyway or credentials_need_securebits.
// `handlers` gets the handlers of the signals in `caught` (the leader's
// SigCgt), read in the same session (proc/signals.hpp, read_handlers).
Status read_task_states(pid_t pid, std::vector<image::ThreadRecord>* threads,
                        image::ProcessState* state,
                        std::vector<image::TaskCredentials>* creds = nullptr, uint64_t caught = 0,
                        std::vector<image::SignalAction>* handlers = nullptr);

// /proc/PID/limits into (soft, hard) pairs for RLIMIT 0..15.
Status parse_limits(const std::string& text, std::array<uint64_t, 32>* out);

}  // namespace ckpt::proc
