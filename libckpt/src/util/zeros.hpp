// A read-only run of zero bytes, long enough for the longest page run (1 MiB),
// shared by everything that compares against or writes zeros.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ckpt {

constexpr size_t kZeroBytes = 1 << 20;
// Mapped once, never written (an anonymous read-only mapping costs no memory).
const uint8_t* zero_bytes();

}  // namespace ckpt
