// Small formatting helpers for messages and /proc paths.
#pragma once

#include <sys/types.h>

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

// "/proc/PID/WHAT".
inline std::string proc_path(pid_t pid, const std::string& what) {
  return "/proc/" + std::to_string(pid) + "/" + what;
}

}  // namespace ckpt
