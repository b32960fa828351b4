// Thread register state via ptrace: general purpose (with fs/gs base) and the
// full XSAVE area (x87, SSE, AVX, AVX-512...).
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <vector>

namespace ckpt::proc {

Result<user_regs_struct> get_regs(pid_t tid);
Status set_regs(pid_t tid, const user_regs_struct& regs);
Result<std::vector<uint8_t>> get_xstate(pid_t tid);
Status set_xstate(pid_t tid, const std::vector<uint8_t>& xstate);

// The thread's rseq registration (len 0 when it has none).
struct RseqConfig {
  uint64_t ptr = 0;
  uint32_t len = 0;
  uint32_t sig = 0;
};
Result<RseqConfig> get_rseq(pid_t tid);

}  // namespace ckpt::proc
