#pragma once
#include <time.h>

#include <cstdint>

namespace ckpt {

inline double now_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

inline int64_t unix_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline double unix_now_seconds() {
  return double(unix_now_ns()) * 1e-9;
}

}  // namespace ckpt
