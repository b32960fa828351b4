// xxh3-64 with the widest vector unit this CPU has. XXH3's result does not
// depend on the implementation, so images hash the same on every machine.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/hash.hpp"

namespace ckpt {

uint64_t xxh3_avx2(const void* data, size_t len);  // hash_avx2.cpp, built with -mavx2

namespace {
using HashFn = uint64_t (*)(const void*, size_t);
uint64_t xxh3_baseline(const void* data, size_t len) {
  return XXH3_64bits(data, len);
}
HashFn pick() {
  return __builtin_cpu_supports("avx2") ? xxh3_avx2 : xxh3_baseline;
}
const HashFn g_hash = pick();  // chosen once at load time; immutable afterwards
}  // namespace

uint64_t xxh3(const void* data, size_t len) {
  return g_hash(data, len);
}

}  // namespace ckpt
