// Where a call's time goes, phase by phase, told to the caller's log
// (LogFn: "phase final copy 12.3 ms"); tools print it with --trace, and
// docs/performance.md uses it to split a freeze. Costs nothing without a log.
#pragma once

#include <ckpt/ckpt.hpp>
#include <cstdio>

#include "util/clock.hpp"

namespace ckpt {

// Tells the time since the previous mark (or since construction).
class PhaseTrace {
 public:
  PhaseTrace(const char* scope, const LogFn* log)
      : scope_(scope), log_(log && *log ? log : nullptr), t_(log_ ? now_seconds() : 0) {}
  void mark(const char* phase) {
    if (!log_) return;
    const double t = now_seconds();
    char line[160];
    std::snprintf(line, sizeof line, "phase %s %-24s %8.2f ms", scope_, phase, (t - t_) * 1e3);
    (*log_)(LogKind::trace, line);
    t_ = t;
  }

 private:
  const char* scope_;
  const LogFn* log_;
  double t_;
};

}  // namespace ckpt
