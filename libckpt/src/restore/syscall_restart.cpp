#include "restore/syscall_restart.hpp"

#include <sys/syscall.h>

namespace ckpt::restore {

namespace {
// Kernel-internal return codes seen by a tracer at an interrupt stop.
constexpr long kErestartSys = 512;
constexpr long kErestartNoIntr = 513;
constexpr long kErestartNoHand = 514;
constexpr long kErestartRestartBlock = 516;
constexpr int kTimerAbstime = 1;
constexpr unsigned long long kSyscallInsnLen = 2;  // 0f 05
}  // namespace

user_regs_struct resume_registers(const user_regs_struct& captured) {
  user_regs_struct r = captured;
  const long nr = long(captured.orig_rax);
  r.orig_rax = ~0ull;  // the fresh process is not inside a system call
  if (nr < 0) return r;
  switch (-long(captured.rax)) {
    case kErestartSys:
    case kErestartNoIntr:
    case kErestartNoHand:
      // What the kernel itself does when no handler runs: re-execute the call.
      r.rax = captured.orig_rax;
      r.rip -= kSyscallInsnLen;
      break;
    case kErestartRestartBlock:
      // The kernel would call restart_syscall(), whose state (the restart
      // block) does not survive the checkpoint: re-execute the original call.
      // A relative sleep continues with its remaining time, which the kernel
      // already wrote to the caller's `rem` buffer when one was given.
      r.rax = captured.orig_rax;
      r.rip -= kSyscallInsnLen;
      if (nr == SYS_nanosleep && captured.rsi != 0) r.rdi = captured.rsi;
      if (nr == SYS_clock_nanosleep && !(captured.rsi & kTimerAbstime) && captured.r10 != 0)
        r.rdx = captured.r10;
      break;
    default:
      break;
  }
  return r;
}

user_regs_struct live_resume_registers(const user_regs_struct& captured) {
  user_regs_struct r = captured;
  r.orig_rax = ~0ull;
  if (long(captured.orig_rax) < 0) return r;
  switch (-long(captured.rax)) {
    case kErestartSys:
    case kErestartNoIntr:
    case kErestartNoHand:
      r.rax = captured.orig_rax;
      r.rip -= kSyscallInsnLen;
      break;
    case kErestartRestartBlock:
      r.rax = SYS_restart_syscall;  // the live task still holds its restart block
      r.rip -= kSyscallInsnLen;
      break;
    default:
      break;
  }
  return r;
}

}  // namespace ckpt::restore
