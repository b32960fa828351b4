#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/hash.hpp"

namespace ckpt {
uint64_t xxh3(const void* data, size_t len) {
  return XXH3_64bits(data, len);
}
}  // namespace ckpt
