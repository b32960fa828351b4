// Benchmark memory that no checkpoint can shrink: xorshift64 words, so no
// page is zero and no two pages are alike.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace bench {

// A private anonymous mapping of `bytes`, every word written (nullptr if the
// mapping fails).
inline uint64_t* map_incompressible(size_t bytes) {
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* p = static_cast<uint64_t*>(m);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < bytes / 8; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = x;
  }
  return p;
}

}  // namespace bench
