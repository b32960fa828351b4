#pragma once
#include <cstdint>
#include <vector>

namespace ckpt::mem {

// A page-aligned span of a process's address space.
struct Range {
  uint64_t addr = 0;
  uint64_t len = 0;
  uint64_t end() const { return addr + len; }
};

// Appends [addr, addr+len), merging with the last range when contiguous.
inline void append_range(std::vector<Range>& out, uint64_t addr, uint64_t len) {
  if (!out.empty() && out.back().end() == addr)
    out.back().len += len;
  else
    out.push_back(Range{addr, len});
}

}  // namespace ckpt::mem
