// resume_registers(): the registers a restored thread resumes with, so that
// a system call the checkpoint interrupted continues as if never interrupted.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <time.h>

#include <cstring>
#include <string>

#include "proc/syscall_restart.hpp"

namespace ckpt::proc {
namespace {

constexpr unsigned long long kNotInSyscall = ~0ull;  // orig_rax == -1
constexpr unsigned long long kRip = 0x7ffff7e9a1b2;  // just after a `syscall` instruction
constexpr unsigned long long kReq = 0x7fffffffd000, kRem = 0x7fffffffd010;

unsigned long long neg(long v) {
  return (unsigned long long)(-v);
}

// Registers with a distinct value in every word, so an unintended change to
// any register shows up.
user_regs_struct captured(unsigned long long orig_rax, unsigned long long rax) {
  user_regs_struct r;
  auto* w = reinterpret_cast<unsigned long long*>(&r);
  for (size_t i = 0; i < sizeof r / 8; ++i) w[i] = 0x1111111111111111ull * (i % 15 + 1) + i;
  r.orig_rax = orig_rax;
  r.rax = rax;
  r.rip = kRip;
  return r;
}

// Compares every register, naming the ones that differ.
void expect_regs(const user_regs_struct& got, const user_regs_struct& want) {
  static const char* names[] = {"r15",     "r14",      "r13", "r12", "rbp",    "rbx", "r11",
                                "r10",     "r9",       "r8",  "rax", "rcx",    "rdx", "rsi",
                                "rdi",     "orig_rax", "rip", "cs",  "eflags", "rsp", "ss",
                                "fs_base", "gs_base",  "ds",  "es",  "fs",     "gs"};
  static_assert(sizeof(user_regs_struct) == sizeof names / sizeof names[0] * 8);
  auto* g = reinterpret_cast<const unsigned long long*>(&got);
  auto* w = reinterpret_cast<const unsigned long long*>(&want);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    EXPECT_EQ(g[i], w[i]) << names[i] << " = 0x" << std::hex << g[i] << ", want 0x" << w[i];
}

// The kernel's internal restart codes a tracer sees in rax at an interrupt stop.
constexpr long kErestartSys = 512, kErestartNoIntr = 513, kErestartNoHand = 514,
               kErestartRestartBlock = 516;

TEST(SyscallRestart, RestartCodesReexecuteTheCall) {
  for (long code : {kErestartSys, kErestartNoIntr, kErestartNoHand, kErestartRestartBlock})
    for (unsigned long long nr : {(unsigned long long)SYS_read, (unsigned long long)SYS_wait4,
                                  (unsigned long long)SYS_poll, (unsigned long long)SYS_futex}) {
      SCOPED_TRACE("-" + std::to_string(code) + " in syscall " + std::to_string(nr));
      user_regs_struct in = captured(nr, neg(code));
      user_regs_struct want = in;
      want.rax = nr;        // the syscall number again
      want.rip = kRip - 2;  // back onto the 2-byte `syscall` instruction
      want.orig_rax = kNotInSyscall;
      expect_regs(resume_registers(in), want);
    }
}

TEST(SyscallRestart, NotStoppedInASyscall) {
  // rax holds user data here, even when it looks like a restart code.
  for (unsigned long long rax : {0ull, 42ull, neg(kErestartSys), neg(kErestartRestartBlock)}) {
    SCOPED_TRACE(rax);
    user_regs_struct in = captured(kNotInSyscall, rax);
    expect_regs(resume_registers(in), in);
  }
}

TEST(SyscallRestart, CompletedOrFailedSyscallIsLeftAlone) {
  // A finished call (0, a byte count that happens to be 512, a real error
  // such as -EINTR or -EAGAIN) keeps its result; only orig_rax is cleared.
  for (unsigned long long rax : {0ull, 512ull, 516ull, neg(EINTR), neg(EAGAIN), neg(4095)}) {
    SCOPED_TRACE(rax);
    user_regs_struct in = captured(SYS_read, rax);
    user_regs_struct want = in;
    want.orig_rax = kNotInSyscall;
    expect_regs(resume_registers(in), want);
  }
}

TEST(SyscallRestart, NanosleepContinuesWithTheRemainingTime) {
  user_regs_struct in = captured(SYS_nanosleep, neg(kErestartRestartBlock));
  in.rdi = kReq;
  in.rsi = kRem;
  user_regs_struct want = in;
  want.rax = SYS_nanosleep;
  want.rip = kRip - 2;
  want.orig_rax = kNotInSyscall;
  want.rdi = kRem;  // the kernel wrote the time left to *rem
  expect_regs(resume_registers(in), want);
}

TEST(SyscallRestart, NanosleepWithoutRemKeepsTheRequest) {
  user_regs_struct in = captured(SYS_nanosleep, neg(kErestartRestartBlock));
  in.rdi = kReq;
  in.rsi = 0;
  user_regs_struct want = in;
  want.rax = SYS_nanosleep;
  want.rip = kRip - 2;
  want.orig_rax = kNotInSyscall;
  expect_regs(resume_registers(in), want);
}

TEST(SyscallRestart, NanosleepSwapsOnlyForTheRestartBlockCode) {
  for (long code : {kErestartSys, kErestartNoIntr, kErestartNoHand}) {
    SCOPED_TRACE(code);
    user_regs_struct in = captured(SYS_nanosleep, neg(code));
    in.rdi = kReq;
    in.rsi = kRem;
    EXPECT_EQ(resume_registers(in).rdi, kReq);
  }
  // Interrupted and already returned -EINTR: nothing to restart.
  user_regs_struct in = captured(SYS_nanosleep, neg(EINTR));
  in.rdi = kReq;
  in.rsi = kRem;
  user_regs_struct out = resume_registers(in);
  EXPECT_EQ(out.rdi, kReq);
  EXPECT_EQ(out.rip, kRip);
  EXPECT_EQ(out.rax, neg(EINTR));
}

user_regs_struct clock_nanosleep_regs(unsigned long long flags, unsigned long long rem) {
  user_regs_struct in = captured(SYS_clock_nanosleep, neg(kErestartRestartBlock));
  in.rdi = CLOCK_MONOTONIC;
  in.rsi = flags;
  in.rdx = kReq;
  in.r10 = rem;
  return in;
}

TEST(SyscallRestart, RelativeClockNanosleepContinuesWithTheRemainingTime) {
  user_regs_struct in = clock_nanosleep_regs(0, kRem);
  user_regs_struct want = in;
  want.rax = SYS_clock_nanosleep;
  want.rip = kRip - 2;
  want.orig_rax = kNotInSyscall;
  want.rdx = kRem;  // request <- rem; clock id, flags and rem unchanged
  expect_regs(resume_registers(in), want);
}

TEST(SyscallRestart, AbsoluteClockNanosleepKeepsItsDeadline) {
  user_regs_struct in = clock_nanosleep_regs(TIMER_ABSTIME, kRem);
  user_regs_struct want = in;
  want.rax = SYS_clock_nanosleep;
  want.rip = kRip - 2;
  want.orig_rax = kNotInSyscall;
  expect_regs(resume_registers(in), want);
  // The kernel restarts absolute sleeps with -ERESTARTNOHAND: same result.
  in.rax = neg(kErestartNoHand);
  expect_regs(resume_registers(in), want);
}

TEST(SyscallRestart, RelativeClockNanosleepWithoutRemKeepsTheRequest) {
  user_regs_struct in = clock_nanosleep_regs(0, 0);
  user_regs_struct want = in;
  want.rax = SYS_clock_nanosleep;
  want.rip = kRip - 2;
  want.orig_rax = kNotInSyscall;
  expect_regs(resume_registers(in), want);
}

TEST(SyscallRestart, IsIdempotentOnItsOwnOutput) {
  // Resuming registers that were already adjusted (not in a syscall any more)
  // changes nothing: a restored process checkpointed again before it ran is safe.
  user_regs_struct once = resume_registers(clock_nanosleep_regs(0, kRem));
  expect_regs(resume_registers(once), once);
}

// live_resume_registers(): the process the registers came from still has its
// kernel restart block, so restart-block calls go through restart_syscall.
TEST(LiveResumeRegisters, RestartBlockUsesRestartSyscall) {
  user_regs_struct in = captured(SYS_nanosleep, neg(516));
  in.rsi = kRem;
  user_regs_struct want = in;
  want.orig_rax = kNotInSyscall;
  want.rax = SYS_restart_syscall;
  want.rip = kRip - 2;  // rdi untouched: the kernel keeps the deadline itself
  expect_regs(live_resume_registers(in), want);
}

TEST(LiveResumeRegisters, RestartableCallsAreReissued) {
  for (long code : {512L, 513L, 514L}) {
    SCOPED_TRACE(code);
    user_regs_struct in = captured(SYS_read, neg(code));
    user_regs_struct want = in;
    want.orig_rax = kNotInSyscall;
    want.rax = SYS_read;
    want.rip = kRip - 2;
    expect_regs(live_resume_registers(in), want);
  }
}

TEST(LiveResumeRegisters, OutsideASyscallOnlyClearsOrigRax) {
  user_regs_struct in = captured(kNotInSyscall, neg(516));
  user_regs_struct want = in;
  expect_regs(live_resume_registers(in), want);
  user_regs_struct done = captured(SYS_read, 42);
  user_regs_struct want_done = done;
  want_done.orig_rax = kNotInSyscall;
  expect_regs(live_resume_registers(done), want_done);
}

}  // namespace
}  // namespace ckpt::proc
