// Argument checks shared by the planners: a figure that makes no sense is
// refused with EINVAL and a one-line cause naming it.
#pragma once

#include <ckpt/result.hpp>
#include <cmath>
#include <cstdio>
#include <string>

namespace ckpt::plan {

inline std::string figure(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

inline Status need_positive(const char* name, double v) {
  if (!std::isfinite(v) || v <= 0)
    return make_error(EINVAL, std::string(name) + " must be a positive number, not " + figure(v));
  return {};
}

inline Status need_non_negative(const char* name, double v) {
  if (!std::isfinite(v) || v < 0)
    return make_error(EINVAL, std::string(name) + " must not be negative, not " + figure(v));
  return {};
}

inline Status need_fraction(const char* name, double v) {
  if (!std::isfinite(v) || v < 0 || v >= 1)
    return make_error(EINVAL, std::string(name) + " must be in [0, 1), not " + figure(v));
  return {};
}

}  // namespace ckpt::plan
