#include "proc/syscall_restart.hpp"

#include <sys/syscall.h>

namespace ckpt::proc {

namespace {
// Kernel-internal return codes seen by a tracer at an interrupt stop.
constexpr long kErestartSys = 512;
constexpr long kErestartNoIntr = 513;
constexpr long kErestartNoHand = 514;
constexpr long kErestartRestartBlock = 516;
constexpr int kTimerAbstime = 1;
constexpr unsigned long long kSyscallInsnLen = 2;  // 0f 05
}  // namespace

namespace {

// The restart the kernel makes when a call returns one of its -ERESTART*
// codes and no signal handler runs. `fresh`: the registers go to a new
// process, which has no restart block.
user_regs_struct restart(const user_regs_struct& captured, bool fresh) {
  user_regs_struct r = captured;
  const long nr = long(captured.orig_rax);
  r.orig_rax = ~0ull;  // the resumed thread is not inside a system call
  if (nr < 0) return r;
  switch (-long(captured.rax)) {
    case kErestartSys:
    case kErestartNoIntr:
    case kErestartNoHand:
      r.rax = captured.orig_rax;  // re-execute the call
      r.rip -= kSyscallInsnLen;
      break;
    case kErestartRestartBlock:
      r.rip -= kSyscallInsnLen;
      if (!fresh) {
        r.rax = SYS_restart_syscall;  // the live task still holds its restart block
        break;
      }
      // A new process has none: re-execute the original call. A relative
      // sleep continues with its remaining time, which the kernel already
      // wrote to the caller's `rem` buffer when one was given.
      r.rax = captured.orig_rax;
      if (nr == SYS_nanosleep && captured.rsi != 0) r.rdi = captured.rsi;
      if (nr == SYS_clock_nanosleep && !(captured.rsi & kTimerAbstime) && captured.r10 != 0)
        r.rdx = captured.r10;
      break;
    default:
      break;
  }
  return r;
}

}  // namespace

user_regs_struct resume_registers(const user_regs_struct& captured) {
  return restart(captured, true);
}

user_regs_struct live_resume_registers(const user_regs_struct& captured) {
  return restart(captured, false);
}

}  // namespace ckpt::proc
