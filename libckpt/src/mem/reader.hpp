// Bulk reads of another process's memory: process_vm_readv with up to 1024
// remote iovecs per call, falling back to /proc/PID/mem (which can read
// PROT_NONE pages) for whatever process_vm_readv refuses.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>

#include "mem/range.hpp"
#include "util/fd.hpp"

namespace ckpt::mem {

class RemoteReader {
 public:
  explicit RemoteReader(pid_t pid) : pid_(pid) {}
  // Reads the ranges one after another into `buf`.
  Status read(const Range* ranges, size_t n, uint8_t* buf);

 private:
  Status read_via_mem(uint64_t addr, uint64_t len, uint8_t* buf);
  pid_t pid_;
  UniqueFd mem_;
};

}  // namespace ckpt::mem
