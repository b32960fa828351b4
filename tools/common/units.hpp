// Figures as the tools take them on the command line: times with a unit
// ("90", "90s", "1.5min", "1.25h", "2d", "100y": 365-day years) and sizes
// ("4096", "125M", "1.5G" decimal; "512Mi", "4Gi" binary); and a figure as
// the tools print it.
#pragma once

#include <optional>
#include <string>

namespace ckpt::cli {

// Seconds; nullopt for text that is not a finite number with a known unit.
std::optional<double> parse_duration(const std::string& text);
// Bytes; nullopt for text that is not a finite number with a known unit.
std::optional<double> parse_bytes(const std::string& text);
// `v` through printf's `format` (one double conversion): "%.4g" by default.
std::string format_figure(double v, const char* format = "%.4g");

}  // namespace ckpt::cli
