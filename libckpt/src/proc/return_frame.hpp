// What makes a call injected into a live thread survive the tracer's death.
//
// A thread whose tracer dies is released from its ptrace stop and runs on
// from whatever registers and signal mask it holds at that instant. So calls
// are injected the way a signal handler runs: before the first one, a signal
// frame holding the thread's own registers, signal mask and FPU/vector state
// is written below its stack pointer (past the red zone, memory the thread
// does not use), and every call runs from a "syscall" instruction of the
// vdso that is followed only by register clears, pops and "ret". The ret
// lands on the frame's return address: an "rt_sigreturn" sequence found in
// the target's own code (glibc's, musl's or Go's signal return). A thread
// let go at any stop therefore finishes the call, returns through the frame
// and resumes exactly where it was, with its own registers and mask.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <vector>

namespace ckpt::proc {

// Code in the target's mm (shared by its threads) that injection runs.
struct InjectSite {
  uint64_t syscall_insn = 0;  // "syscall", then only clears/pops and "ret"
  unsigned pops = 0;          // stack slots popped before the ret
  uint64_t sigreturn = 0;     // "mov $15, %eax/%rax; syscall"; 0: none found
};

// Finds both. Without a sigreturn sequence (a static program that never
// installed a signal handler) or a vdso syscall followed by a plain return,
// `sigreturn` stays 0 and callers fall back to plain injection (see
// docs/state.md).
Result<InjectSite> find_inject_site(pid_t pid);

// The frame written for one thread: `parked` are registers that, loaded now,
// make the thread return to its own state through the frame; `call_rsp` is
// the stack pointer every injected call runs with.
struct ReturnFrame {
  user_regs_struct parked;
  uint64_t call_rsp = 0;
  // Below call_rsp, inside the room checked for a handler: where the calls
  // may leave their answers (kStackScratchSize bytes, proc/inject.hpp). The
  // calls themselves use no stack, and every signal is blocked while they
  // run, so nothing else writes there meanwhile.
  uint64_t scratch = 0;
};

// Writes the frame for thread `tid`, stopped with `captured` registers and
// signal mask `mask`. `resume` are the registers it must come back with
// (a call it was blocked in re-executed, since rt_sigreturn drops the
// kernel's restart block). Fails (and writes nothing that matters) when its
// stack has no room below the red zone.
Result<ReturnFrame> write_return_frame(pid_t tid, const InjectSite& site,
                                       const user_regs_struct& resume, uint64_t mask);

}  // namespace ckpt::proc
