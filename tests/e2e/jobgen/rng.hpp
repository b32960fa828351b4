// A small, fully specified random generator: the same seed draws the same
// job on every machine and with every compiler (std::uniform_int_distribution
// is not specified bit for bit, so it is not used).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace jobgen {

inline uint64_t splitmix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A hash of a few words: the content of messages and pages.
inline uint64_t mix(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  uint64_t x = a ^ 0x51ed270b27a2b1b7ULL;
  uint64_t h = splitmix64(&x);
  x = h ^ b;
  h = splitmix64(&x);
  x = h ^ c;
  h = splitmix64(&x);
  x = h ^ d;
  return splitmix64(&x);
}

// xoshiro256**.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(&seed);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, n) (n > 0); the slight bias of a modulo does not matter here.
  uint64_t below(uint64_t n) { return next() % n; }
  // Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(below(uint64_t(hi - lo + 1))); }
  bool chance(double p) { return double(next() >> 11) * 0x1.0p-53 < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace jobgen
