#include "proc/regs.hpp"

#include <elf.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include <string>

namespace ckpt::proc {

Result<user_regs_struct> get_regs(pid_t tid) {
  user_regs_struct r;
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &r) != 0)
    return sys_error("reading registers of " + std::to_string(tid));
  return r;
}

Status set_regs(pid_t tid, const user_regs_struct& regs) {
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) != 0)
    return sys_error("setting registers of " + std::to_string(tid));
  return {};
}

Result<std::vector<uint8_t>> get_xstate(pid_t tid) {
  // The kernel trims the transfer to the XSAVE size of this CPU; 64 KiB covers AMX.
  std::vector<uint8_t> buf(64 * 1024);
  iovec iov{buf.data(), buf.size()};
  if (::ptrace(PTRACE_GETREGSET, tid, (void*)(long)NT_X86_XSTATE, &iov) != 0)
    return sys_error("reading FPU/vector state of " + std::to_string(tid));
  buf.resize(iov.iov_len);
  return buf;
}

Status set_xstate(pid_t tid, const std::vector<uint8_t>& xstate) {
  std::vector<uint8_t> copy = xstate;
  iovec iov{copy.data(), copy.size()};
  if (::ptrace(PTRACE_SETREGSET, tid, (void*)(long)NT_X86_XSTATE, &iov) != 0)
    return sys_error("setting FPU/vector state of " + std::to_string(tid) +
                     " (a CPU with other vector features?)");
  return {};
}

Result<RseqConfig> get_rseq(pid_t tid) {
  struct {
    uint64_t rseq_abi_pointer;
    uint32_t rseq_abi_size;
    uint32_t signature;
    uint32_t flags;
    uint32_t pad;
  } conf{};
  long n = ::ptrace(PTRACE_GET_RSEQ_CONFIGURATION, tid, (void*)sizeof conf, &conf);
  if (n < 0) {
    if (errno == EIO) return RseqConfig{};  // kernel older than 5.13: assume none
    return sys_error("reading rseq registration of " + std::to_string(tid));
  }
  return RseqConfig{conf.rseq_abi_pointer, conf.rseq_abi_size, conf.signature};
}

}  // namespace ckpt::proc
