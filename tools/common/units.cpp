#include "common/units.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace ckpt::cli {

namespace {

std::optional<double> scaled(const std::string& text, const std::map<std::string, double>& units) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v)) return std::nullopt;
  auto u = units.find(end);
  if (u == units.end()) return std::nullopt;
  return v * u->second;
}

}  // namespace

std::optional<double> parse_duration(const std::string& text) {
  static const std::map<std::string, double> units = {
      {"", 1}, {"s", 1}, {"min", 60}, {"h", 3600}, {"d", 86400}, {"y", 365 * 86400.0}};
  return scaled(text, units);
}

std::optional<double> parse_bytes(const std::string& text) {
  static const std::map<std::string, double> units = {{"", 1},
                                                      {"B", 1},
                                                      {"k", 1e3},
                                                      {"K", 1e3},
                                                      {"M", 1e6},
                                                      {"G", 1e9},
                                                      {"T", 1e12},
                                                      {"Ki", 1024.0},
                                                      {"Mi", 1 << 20},
                                                      {"Gi", 1 << 30},
                                                      {"Ti", 1099511627776.0}};
  return scaled(text, units);
}

std::string format_figure(double v, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace ckpt::cli
