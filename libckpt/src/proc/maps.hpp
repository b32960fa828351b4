// Parsing of /proc/PID/maps and the mm fields of /proc/PID/stat.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::proc {

struct MapEntry {
  uint64_t start = 0, end = 0;
  bool r = false, w = false, x = false, shared = false;
  uint64_t offset = 0;
  unsigned dev_major = 0, dev_minor = 0;
  uint64_t inode = 0;
  std::string path;  // may be empty, "[heap]", "/path (deleted)", ...
};

// Private anonymous memory: the heap, the stack, nameless and [anon:...]
// mappings that are not shared.
inline bool private_anonymous(const MapEntry& m) {
  return !m.shared && m.inode == 0 &&
         (m.path.empty() || m.path == "[heap]" || m.path == "[stack]" ||
          m.path.rfind("[anon:", 0) == 0);
}

Result<std::vector<MapEntry>> read_maps(pid_t pid);
std::vector<MapEntry> parse_maps(const std::string& text);

// Fields 26-28 and 45-51 of /proc/PID/stat (visible to a tracer).
struct StatMm {
  uint64_t start_code = 0, end_code = 0, start_stack = 0;
  uint64_t start_data = 0, end_data = 0, start_brk = 0;
  uint64_t arg_start = 0, arg_end = 0, env_start = 0, env_end = 0;
  unsigned long flags = 0;  // field 9 (PF_*)
  char state = '?';
  pid_t ppid = 0, pgid = 0, sid = 0;  // fields 4-6
  uint64_t tty_nr = 0;                // field 7: its controlling terminal's device (0: none)
  int exit_code = 0;                  // field 52: a zombie's wait status
};
Result<StatMm> read_stat_mm(pid_t pid);

}  // namespace ckpt::proc
