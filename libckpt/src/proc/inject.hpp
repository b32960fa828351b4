// Runs system calls inside a ptrace-stopped tracee: point its instruction
// pointer at a "syscall; int3" sequence it has mapped, continue, and collect
// the result at the int3 trap. Used to rebuild a restored process's address
// space from the outside, and to act on a target's behalf.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <functional>
#include <vector>

#include "proc/return_frame.hpp"

// "syscall; int3" inside libckpt's own text. A child forked from the calling
// process has it at the same address.
extern "C" char ckpt_inject_insn[];
// The loop RemoteSyscall::call_batch runs: position independent, copied into
// the tracee (never run here).
extern "C" char ckpt_batch_code[], ckpt_batch_code_end[];

namespace ckpt::proc {

// A "syscall" instruction in the target's vdso (every x86-64 vdso has one in
// its fallback paths), for injecting calls into a process that does not
// share our text. Nothing follows it that we control, so calls made from it
// use RemoteSyscall::call_to_exit (stop at the system call's exit).
Result<uint64_t> find_syscall_insn(pid_t pid);

constexpr size_t kInjectInsnLen = 3;  // 0f 05 cc
constexpr uint8_t kInjectInsnBytes[kInjectInsnLen] = {0x0f, 0x05, 0xcc};

// Whether a raw system call return value is a failure (-errno): the kernel
// returns -1..-4095 for errors; anything else, an address from mmap among
// them, is a result.
constexpr bool is_syscall_error(long ret) {
  return ret < 0 && ret > -4096;
}

class RemoteSyscall {
 public:
  // `base`: the tracee's registers at its current stop (all but the syscall
  // registers are kept as they are); `insn`: address of "syscall; int3".
  RemoteSyscall(pid_t tid, const user_regs_struct& base, uint64_t insn)
      : tid_(tid), base_(base), insn_(insn) {}

  void set_insn(uint64_t insn) { insn_ = insn; }
  pid_t tid() const { return tid_; }
  // Room for the calls' answers on the thread's own stack, below the
  // registers it runs the calls with (kStackScratchSize bytes); 0 when
  // there is none (injection without a return frame): map a scratch page.
  uint64_t stack_scratch() const { return stack_scratch_; }
  void set_stack_scratch(uint64_t addr) { stack_scratch_ = addr; }

  // Runs one system call; returns the kernel's raw return value (a negative
  // errno on failure). The Result fails only when the tracee misbehaves.
  // ptrace event stops on the way (a traced clone) are passed through.
  Result<long> call(long nr, uint64_t a1 = 0, uint64_t a2 = 0, uint64_t a3 = 0, uint64_t a4 = 0,
                    uint64_t a5 = 0, uint64_t a6 = 0);

  // Runs one system call from a bare "syscall" instruction (no int3 after
  // it) and leaves the tracee stopped at the call's exit.
  Result<long> call_to_exit(long nr, uint64_t a1 = 0, uint64_t a2 = 0, uint64_t a3 = 0,
                            uint64_t a4 = 0, uint64_t a5 = 0, uint64_t a6 = 0);

  // One system call of a batch: `ret` is the kernel's answer once run, or
  // kNotRun when an earlier call of the batch failed.
  struct BatchCall {
    long nr = 0;
    uint64_t a[6] = {};
    bool may_fail = false;  // its failure does not end the batch
    long ret = 0;
  };
  static constexpr long kNotRun = 1l << 62;
  static constexpr size_t kBatchEntry = 64;  // bytes per call in the table
  // Runs `calls` in one round trip: the tracee runs a copy of
  // ckpt_batch_code at `code` over a table it reads at `table`
  // (calls->size() * kBatchEntry bytes of its writable memory) and traps
  // after the last call, or after the first failure of one that may not
  // fail. The Result fails only when the tracee misbehaves.
  Status call_batch(uint64_t code, uint64_t table, std::vector<BatchCall>* calls);

  // Runs a last system call and stops at its exit, with `final_regs` loaded
  // (used when the call unmaps the instruction it runs from).
  Result<long> call_and_load(const user_regs_struct& final_regs, long nr, uint64_t a1 = 0,
                             uint64_t a2 = 0);

 private:
  user_regs_struct prepare(long nr, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5,
                           uint64_t a6) const;
  Status wait_stop(int* status);

  pid_t tid_;
  user_regs_struct base_;
  uint64_t insn_;
  uint64_t stack_scratch_ = 0;
};

// The size of RemoteSyscall::stack_scratch: enough for a stack_t, an
// itimerval or an itimerspec.
constexpr size_t kStackScratchSize = 128;

// Runs `body` with injected calls into a tracee that is in a ptrace stop of
// ours, through a "syscall" instruction of its vdso; afterwards its
// registers are what the kernel itself would have resumed it with (a call
// it was blocked in restarts), whatever `body` did or returned.
Status with_injected_calls(pid_t pid, const std::function<Status(RemoteSyscall&)>& body);
// The same through the code `site` found in the tracee's mm (shared by its
// threads). Every call returns through a signal frame holding the thread's
// own state, so a tracer that dies at any instant leaves a thread that goes
// back to where it was (proc/return_frame.hpp).
Status with_injected_calls(pid_t pid, const InjectSite& site,
                           const std::function<Status(RemoteSyscall&)>& body);

// A page mapped in a tracee for calls' answers when a thread has no room
// on its stack (no return frame).
constexpr size_t kScratchSize = 4096;

// Copies `len` bytes between the tracee's memory at `addr` and ours.
Status read_remote(pid_t tid, uint64_t addr, void* out, size_t len);
Status write_remote(pid_t tid, uint64_t addr, const void* in, size_t len);

}  // namespace ckpt::proc
