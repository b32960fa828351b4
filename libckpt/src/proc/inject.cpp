#include "proc/inject.hpp"

#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "proc/maps.hpp"
#include "proc/regs.hpp"
#include "proc/return_frame.hpp"
#include "proc/syscall_restart.hpp"

asm(R"(
  .pushsection .text
  .globl ckpt_inject_insn
  .type ckpt_inject_insn, @function
ckpt_inject_insn:
  syscall
  int3
  .size ckpt_inject_insn, 3
  .popsection
)");

// rbx: the table (per call: nr, six arguments, then flags, overwritten by
// the result), r12: calls left. Flag 1: a failure does not stop the loop.
asm(R"(
  .pushsection .text
  .globl ckpt_batch_code
  .globl ckpt_batch_code_end
ckpt_batch_code:
1:
  test %r12, %r12
  jz 2f
  mov (%rbx), %rax
  mov 8(%rbx), %rdi
  mov 16(%rbx), %rsi
  mov 24(%rbx), %rdx
  mov 32(%rbx), %r10
  mov 40(%rbx), %r8
  mov 48(%rbx), %r9
  mov 56(%rbx), %r13
  syscall
  mov %rax, 56(%rbx)
  add $64, %rbx
  dec %r12
  cmp $-4095, %rax
  jb 1b
  test $1, %r13
  jnz 1b
2:
  int3
ckpt_batch_code_end:
  .popsection
)");

namespace ckpt::proc {

namespace {

// The first "syscall" (0f 05) in mapping `m`, or 0. Any two such bytes will
// do, even inside a longer instruction: the call starts there and is
// stopped at its exit (PTRACE_SYSCALL) before anything after it runs.
Result<uint64_t> syscall_in(pid_t pid, const MapEntry& m) {
  std::vector<uint8_t> text(m.end - m.start);
  iovec l{text.data(), text.size()}, r{reinterpret_cast<void*>(m.start), text.size()};
  if (::process_vm_readv(pid, &l, 1, &r, 1, 0) != ssize_t(text.size()))
    return sys_error("reading the target's code at " + std::to_string(m.start));
  for (size_t i = 0; i + 1 < text.size(); ++i)
    if (text[i] == 0x0f && text[i + 1] == 0x05) return m.start + i;
  return uint64_t(0);
}

}  // namespace

Result<uint64_t> find_syscall_insn(pid_t pid) {
  CKPT_ASSIGN(auto maps, read_maps(pid));
  for (const MapEntry& m : maps)
    if (m.path == "[vdso]") {
      CKPT_ASSIGN(uint64_t at, syscall_in(pid, m));
      if (at) return at;
    }
  // No vdso (a program run under valgrind has none): the program's own
  // code, at most 256 MiB of it read.
  uint64_t budget = 256ull << 20;
  for (const MapEntry& m : maps) {
    if (!m.x || !m.r || m.path.empty() || m.path[0] == '[') continue;
    if (m.end - m.start > budget) break;
    budget -= m.end - m.start;
    auto at = syscall_in(pid, m);
    if (at.ok() && *at) return *at;
  }
  return make_error(ENOTSUP,
                    "no syscall instruction found in the target's code (vdso, libraries, program)");
}

user_regs_struct RemoteSyscall::prepare(long nr, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                                        uint64_t a5, uint64_t a6) const {
  user_regs_struct r = base_;
  r.rip = insn_;
  r.rax = uint64_t(nr);
  r.orig_rax = uint64_t(-1);  // not inside a syscall: no restart fix-ups by the kernel
  r.rdi = a1;
  r.rsi = a2;
  r.rdx = a3;
  r.r10 = a4;
  r.r8 = a5;
  r.r9 = a6;
  return r;
}

Status RemoteSyscall::wait_stop(int* status) {
  for (;;) {
    if (::waitpid(tid_, status, __WALL) < 0) {
      if (errno == EINTR) continue;
      return sys_error("waiting for " + std::to_string(tid_));
    }
    if (WIFSTOPPED(*status)) return {};
    return make_error(ESRCH, "process " + std::to_string(tid_) + " died during a remote call");
  }
}

Result<long> RemoteSyscall::call(long nr, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                                 uint64_t a5, uint64_t a6) {
  CKPT_TRY(set_regs(tid_, prepare(nr, a1, a2, a3, a4, a5, a6)));
  if (::ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) return sys_error("ptrace cont");
  int st;
  CKPT_TRY(wait_stop(&st));
  while (WSTOPSIG(st) == SIGTRAP && (st >> 16) != 0) {  // e.g. PTRACE_EVENT_CLONE
    if (::ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) return sys_error("ptrace cont");
    CKPT_TRY(wait_stop(&st));
  }
  if (WSTOPSIG(st) != SIGTRAP || (st >> 16) != 0)
    return make_error(EFAULT, "remote syscall " + std::to_string(nr) + " stopped by signal " +
                                  std::to_string(WSTOPSIG(st)) + " (" + strsignal(WSTOPSIG(st)) +
                                  ")");
  CKPT_ASSIGN(user_regs_struct after, get_regs(tid_));
  if (after.rip != insn_ + kInjectInsnLen)
    return make_error(EFAULT,
                      "remote syscall " + std::to_string(nr) + " trapped at an unexpected address");
  return long(after.rax);
}

Status RemoteSyscall::call_batch(uint64_t code, uint64_t table, std::vector<BatchCall>* calls) {
  if (calls->empty()) return {};
  std::vector<uint64_t> words(calls->size() * 8);
  for (size_t i = 0; i < calls->size(); ++i) {
    const BatchCall& c = (*calls)[i];
    words[i * 8] = uint64_t(c.nr);
    for (int k = 0; k < 6; ++k) words[i * 8 + 1 + size_t(k)] = c.a[k];
    words[i * 8 + 7] = c.may_fail ? 1 : 0;
  }
  const size_t bytes = words.size() * 8;
  CKPT_TRY(write_remote(tid_, table, words.data(), bytes));
  user_regs_struct r = base_;
  r.rip = code;
  r.orig_rax = uint64_t(-1);
  r.rbx = table;
  r.r12 = calls->size();
  CKPT_TRY(set_regs(tid_, r));
  if (::ptrace(PTRACE_CONT, tid_, nullptr, nullptr) != 0) return sys_error("ptrace cont");
  int st;
  CKPT_TRY(wait_stop(&st));
  if (WSTOPSIG(st) != SIGTRAP || (st >> 16) != 0)
    return make_error(EFAULT, "remote system calls stopped by signal " +
                                  std::to_string(WSTOPSIG(st)) + " (" + strsignal(WSTOPSIG(st)) +
                                  ")");
  CKPT_ASSIGN(user_regs_struct after, get_regs(tid_));
  const uint64_t trap = code + uint64_t(ckpt_batch_code_end - ckpt_batch_code);
  if (after.rip != trap || after.r12 > calls->size())
    return make_error(EFAULT, "remote system calls trapped at an unexpected address");
  const size_t ran = calls->size() - after.r12;
  CKPT_TRY(read_remote(tid_, table, words.data(), ran * 8 * 8));
  for (size_t i = 0; i < calls->size(); ++i)
    (*calls)[i].ret = i < ran ? long(words[i * 8 + 7]) : kNotRun;
  return {};
}

Result<long> RemoteSyscall::call_to_exit(long nr, uint64_t a1, uint64_t a2, uint64_t a3,
                                         uint64_t a4, uint64_t a5, uint64_t a6) {
  CKPT_TRY(set_regs(tid_, prepare(nr, a1, a2, a3, a4, a5, a6)));
  int st;
  for (int stop = 0; stop < 2; ++stop) {  // syscall entry, then exit
    if (::ptrace(PTRACE_SYSCALL, tid_, nullptr, nullptr) != 0) return sys_error("ptrace syscall");
    CKPT_TRY(wait_stop(&st));
    if (WSTOPSIG(st) != (SIGTRAP | 0x80))
      return make_error(EFAULT, "remote syscall " + std::to_string(nr) + " stopped by signal " +
                                    std::to_string(WSTOPSIG(st)));
  }
  CKPT_ASSIGN(user_regs_struct after, get_regs(tid_));
  return long(after.rax);
}

Result<long> RemoteSyscall::call_and_load(const user_regs_struct& final_regs, long nr, uint64_t a1,
                                          uint64_t a2) {
  CKPT_ASSIGN(long ret, call_to_exit(nr, a1, a2));
  CKPT_TRY(set_regs(tid_, final_regs));
  return ret;
}

Status with_injected_calls(pid_t pid, const std::function<Status(RemoteSyscall&)>& body) {
  CKPT_ASSIGN(InjectSite site, find_inject_site(pid));
  return with_injected_calls(pid, site, body);
}

namespace {

// Injection without a return frame: a tracer killed meanwhile leaves the
// thread with the call's registers and every signal blocked. Only for a
// target without an rt_sigreturn sequence or without room on its stack.
Status plain_injection(pid_t pid, const user_regs_struct& captured, uint64_t mask, uint64_t insn,
                       const std::function<Status(RemoteSyscall&)>& body) {
  uint64_t all = ~0ull;
  if (::ptrace(PTRACE_SETSIGMASK, pid, (void*)sizeof all, &all) != 0)
    return sys_error("blocking signals during injected calls");
  RemoteSyscall rs(pid, captured, insn);
  Status st = body(rs);
  Status back = set_regs(pid, proc::live_resume_registers(captured));
  if (::ptrace(PTRACE_SETSIGMASK, pid, (void*)sizeof mask, &mask) != 0 && back.ok())
    back = sys_error("restoring the signal mask after injected calls");
  if (!st.ok()) return st;
  return back;
}

}  // namespace

Status with_injected_calls(pid_t pid, const InjectSite& site,
                           const std::function<Status(RemoteSyscall&)>& body) {
  auto captured = get_regs(pid);
  if (!captured.ok()) return captured.error().context("the target must be frozen");
  uint64_t mask = 0;
  if (::ptrace(PTRACE_GETSIGMASK, pid, (void*)sizeof mask, &mask) != 0)
    return sys_error("reading the signal mask before injected calls");
  // rt_sigreturn drops the kernel's restart block, so the frame re-executes
  // an interrupted call as a restore does (resume_registers).
  Result<ReturnFrame> frame = make_error(ENOTSUP, "no rt_sigreturn sequence in the target");
  if (site.sigreturn)
    frame = write_return_frame(pid, site, proc::resume_registers(*captured), mask);
  if (!frame.ok()) return plain_injection(pid, *captured, mask, site.syscall_insn, body);
  // Each step leaves registers that return through the frame: parked on the
  // sigreturn sequence first, then (while calls run) past a syscall whose
  // "ret" reaches it. Signals arriving meanwhile (a timer's) stay queued:
  // everything is blocked until the frame or the last step gives the
  // thread's own mask back.
  CKPT_TRY(set_regs(pid, frame->parked));
  uint64_t all = ~0ull;
  if (::ptrace(PTRACE_SETSIGMASK, pid, (void*)sizeof all, &all) != 0) {
    (void)set_regs(pid, proc::live_resume_registers(*captured));
    return sys_error("blocking signals during injected calls");
  }
  user_regs_struct base = frame->parked;
  base.rsp = frame->call_rsp;
  RemoteSyscall rs(pid, base, site.syscall_insn);
  rs.set_stack_scratch(frame->scratch);
  Status st = body(rs);
  // The mask first: until the registers below are loaded, the thread would
  // still return through the frame, which holds the same mask.
  Status back;
  if (::ptrace(PTRACE_SETSIGMASK, pid, (void*)sizeof mask, &mask) != 0)
    back = sys_error("restoring the signal mask after injected calls");
  Status regs = set_regs(pid, proc::live_resume_registers(*captured));
  if (back.ok()) back = regs;
  if (!st.ok()) return st;
  return back;
}

Status read_remote(pid_t tid, uint64_t addr, void* out, size_t len) {
  iovec l{out, len}, r{reinterpret_cast<void*>(addr), len};
  if (::process_vm_readv(tid, &l, 1, &r, 1, 0) != ssize_t(len))
    return sys_error("reading " + std::to_string(len) + " bytes of process " + std::to_string(tid));
  return {};
}

Status write_remote(pid_t tid, uint64_t addr, const void* in, size_t len) {
  iovec l{const_cast<void*>(in), len}, r{reinterpret_cast<void*>(addr), len};
  if (::process_vm_writev(tid, &l, 1, &r, 1, 0) != ssize_t(len))
    return sys_error("writing " + std::to_string(len) + " bytes into process " +
                     std::to_string(tid));
  return {};
}

}  // namespace ckpt::proc
