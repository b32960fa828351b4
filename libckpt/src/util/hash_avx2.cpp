// The AVX2 build of xxh3 (this file is compiled with -mavx2; see hash.cpp).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace ckpt {
uint64_t xxh3_avx2(const void* data, size_t len) {
  return XXH3_64bits(data, len);
}
}  // namespace ckpt
