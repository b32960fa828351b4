#include "proc/signals.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <string>

#include "proc/inject.hpp"
#include "proc/status.hpp"
#include "util/fd.hpp"

namespace ckpt::proc {

namespace {

// A signal mask of /proc/PID/status ("SigBlk"); 0 where absent.
uint64_t status_mask(const std::string& status, const char* key) {
  uint64_t mask = 0;
  return status_hex(status, key, &mask) ? mask : 0;
}

}  // namespace

Result<SignalMasks> read_signal_masks(pid_t pid, pid_t tid) {
  CKPT_ASSIGN(std::string st, read_file("/proc/" + std::to_string(pid) + "/task/" +
                                        std::to_string(tid) + "/status"));
  return SignalMasks{status_mask(st, "SigBlk"), status_mask(st, "SigIgn"),
                     status_mask(st, "SigCgt")};
}

std::vector<image::SignalAction> ignored_sigactions(const SignalMasks& masks) {
  std::vector<image::SignalAction> out;
  for (uint32_t s = 1; s <= 64; ++s)
    if ((masks.ignored >> (s - 1)) & 1) out.push_back({s, uint64_t(SIG_IGN), 0, 0, 0});
  return out;
}

Status read_handlers(RemoteSyscall& rs, uint64_t scratch, uint64_t caught,
                     std::vector<image::SignalAction>* out) {
  for (uint32_t s = 1; s <= 64; ++s) {
    if (!((caught >> (s - 1)) & 1)) continue;
    CKPT_ASSIGN(long r, rs.call_to_exit(SYS_rt_sigaction, s, 0, scratch, 8));
    if (r != 0) return sys_error("rt_sigaction in the target", int(-r));
    uint64_t ksa[4];  // handler, flags, restorer, mask
    CKPT_TRY(read_remote(rs.tid(), scratch, ksa, sizeof ksa));
    out->push_back({s, ksa[0], ksa[1], ksa[2], ksa[3]});
  }
  return {};
}

}  // namespace ckpt::proc
