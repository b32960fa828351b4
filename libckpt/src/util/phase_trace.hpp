// Where a checkpoint's time goes, phase by phase, on stderr when
// LIBCKPT_TRACE_PHASES is set (docs/performance.md uses it to split the
// final freeze of a live checkpoint). Costs one getenv per process otherwise.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "util/clock.hpp"

namespace ckpt {

inline bool phase_trace_on() {
  static const bool on = std::getenv("LIBCKPT_TRACE_PHASES") != nullptr;
  return on;
}

// Prints the time since the previous mark (or since construction).
class PhaseTrace {
 public:
  explicit PhaseTrace(const char* scope)
      : scope_(scope), t_(phase_trace_on() ? now_seconds() : 0) {}
  void mark(const char* phase) {
    if (!phase_trace_on()) return;
    const double t = now_seconds();
    std::fprintf(stderr, "phase %s %-24s %8.2f ms\n", scope_, phase, (t - t_) * 1e3);
    t_ = t;
  }

 private:
  const char* scope_;
  double t_;
};

}  // namespace ckpt
