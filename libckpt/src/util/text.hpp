// Small formatting helpers for messages and /proc paths.
#pragma once

#include <sys/types.h>

#include <array>

#include <cstdint>
#include <cstdio>
#include <string>

namespace ckpt {

// "0x7f..." (prefix = false: "7f...", as /proc/PID/maps and map_files spell it).
inline std::string hex(uint64_t v, bool prefix = true) {
  char b[32];
  std::snprintf(b, sizeof b, prefix ? "0x%llx" : "%llx", static_cast<unsigned long long>(v));
  return b;
}

// A chain identity (16 bytes) as 32 lower-case hex digits.
inline std::string hex_id(const std::array<uint8_t, 16>& id) {
  std::string s;
  char b[3];
  for (uint8_t c : id) {
    std::snprintf(b, sizeof b, "%02x", c);
    s += b;
  }
  return s;
}

// Calls fn(line) for every line of `text` (without its '\n') from line
// `skip` on (1: past a /proc table's header), until fn returns false. The
// line is a std::string, so sscanf-based parsers get a terminated buffer.
template <typename F>
void for_each_line(const std::string& text, F&& fn, size_t skip = 0) {
  size_t at = 0;
  for (size_t no = 0; at < text.size(); ++no) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (no >= skip && !fn(text.substr(at, end - at))) return;
    at = end + 1;
  }
}

// `s` quoted for a one-line message: control and non-ASCII bytes as \xNN,
// cut after `max` bytes (names read from images are untrusted input).
inline std::string printable(const std::string& s, size_t max = 64) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += char(c);
    }
  }
  return out + (s.size() > max ? "\"..." : "\"");
}

// "/proc/PID/WHAT".
inline std::string proc_path(pid_t pid, const std::string& what) {
  return "/proc/" + std::to_string(pid) + "/" + what;
}

}  // namespace ckpt
