#include "proc/signals.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <cstring>
#include <string>

#include "proc/inject.hpp"
#include "util/fd.hpp"

namespace ckpt::proc {

namespace {

uint64_t status_mask(const std::string& status, const char* key) {
  size_t at = status.find(key);
  if (at == std::string::npos) return 0;
  return std::strtoull(status.c_str() + at + std::strlen(key), nullptr, 16);
}

}  // namespace

Result<SignalMasks> read_signal_masks(pid_t pid, pid_t tid) {
  CKPT_ASSIGN(std::string st, read_file("/proc/" + std::to_string(pid) + "/task/" +
                                        std::to_string(tid) + "/status"));
  return SignalMasks{status_mask(st, "SigBlk:"), status_mask(st, "SigIgn:"),
                     status_mask(st, "SigCgt:")};
}

Result<std::vector<image::SignalAction>> dump_sigactions(pid_t tid, const SignalMasks& masks) {
  std::vector<image::SignalAction> out;
  for (uint32_t s = 1; s <= 64; ++s)
    if ((masks.ignored >> (s - 1)) & 1) out.push_back({s, uint64_t(SIG_IGN), 0, 0, 0});
  if (masks.caught == 0) return out;

  Status st = with_injected_calls(tid, [&](RemoteSyscall& rs) -> Status {
    // A scratch page in the target receives the kernel's answers.
    CKPT_ASSIGN(long scratch, rs.call_to_exit(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS));
    if (scratch < 0 && scratch > -4096) return sys_error("mmap in the target", int(-scratch));
    Status inner;
    for (uint32_t s = 1; s <= 64 && inner.ok(); ++s) {
      if (!((masks.caught >> (s - 1)) & 1)) continue;
      auto r = rs.call_to_exit(SYS_rt_sigaction, s, 0, uint64_t(scratch), 8);
      if (!r.ok() || *r != 0) {
        inner = r.ok() ? sys_error("rt_sigaction in the target", int(-*r)) : r.error();
        break;
      }
      uint64_t ksa[4];  // handler, flags, restorer, mask
      iovec l{ksa, sizeof ksa}, rem{reinterpret_cast<void*>(scratch), sizeof ksa};
      if (::process_vm_readv(tid, &l, 1, &rem, 1, 0) != ssize_t(sizeof ksa)) {
        inner = sys_error("reading sigaction from the target");
        break;
      }
      out.push_back({s, ksa[0], ksa[1], ksa[2], ksa[3]});
    }
    (void)rs.call_to_exit(SYS_munmap, uint64_t(scratch), 4096);
    return inner;
  });
  if (!st.ok()) return st.error();
  return out;
}

}  // namespace ckpt::proc
