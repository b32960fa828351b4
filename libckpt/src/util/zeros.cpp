#include "util/zeros.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace ckpt {

const uint8_t* zero_bytes() {
  static const uint8_t* zeros = [] {
    void* p = ::mmap(nullptr, kZeroBytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();  // at most once per process, 1 MiB of address space
    return static_cast<const uint8_t*>(p);
  }();
  return zeros;
}

}  // namespace ckpt
