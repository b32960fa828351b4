// Settings read from the environment: a few user switches
// (LIBCKPT_ADAPTIVE_TRACKING, ...) and the A/B knobs that
// docs/performance.md's measurements turn.
#pragma once
#include <cstdlib>
#include <cstring>
#include <optional>

namespace ckpt {

// An on/off switch: on unless set to "off" or "0".
inline bool env_switch_on(const char* name) {
  const char* v = std::getenv(name);
  return !v || !(std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0);
}

// A whole number, when the variable is set and not empty (text that is not
// a number reads as 0, as atoi would).
inline std::optional<long long> env_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::strtoll(v, nullptr, 10);
}

}  // namespace ckpt
