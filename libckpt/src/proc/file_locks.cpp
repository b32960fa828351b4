#include "proc/file_locks.hpp"

#include <fcntl.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <cstring>

#include "proc/status.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::proc {

bool parse_lock_line(const std::string& line, LockLine* out) {
  // "1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 0 EOF", "2: -> FLOCK ..." for a
  // waiter in /proc/locks; the kind and its mode are padded with spaces.
  const char* s = line.c_str();
  while (*s == ' ' || *s == '\t') ++s;
  char* end;
  std::strtoll(s, &end, 10);
  if (end == s || *end != ':') return false;
  s = end + 1;
  LockLine l;
  while (*s == ' ') ++s;
  if (std::strncmp(s, "->", 2) == 0) {
    l.waiting = true;
    s += 2;
  }
  char kind[16], mode[16], type[16], where[64], last[32];
  unsigned long long start = 0;
  int n = std::sscanf(s, "%15s %15s %15s %d %63s %llu %31s", kind, mode, type, &l.pid, where,
                      &start, last);
  if (n != 7) return false;
  unsigned long long ino = 0;
  if (std::sscanf(where, "%x:%x:%llu", &l.major, &l.minor, &ino) != 3) return false;
  l.kind = kind;
  l.type = type;
  l.ino = ino;
  l.start = start;
  l.end = std::strcmp(last, "EOF") == 0 ? image::kLockToEof : std::strtoull(last, nullptr, 10);
  *out = std::move(l);
  return true;
}

std::vector<LockLine> fdinfo_locks(const std::string& fdinfo) {
  std::vector<LockLine> out;
  for_each_line(fdinfo, [&](const std::string& line) {
    LockLine l;
    if (line.compare(0, 5, "lock:") == 0 && parse_lock_line(line.substr(5), &l))
      out.push_back(std::move(l));
    return true;
  });
  return out;
}

std::optional<LockLine> conflicting_lock(dev_t dev, uint64_t ino, const image::FileLock& want) {
  auto text = read_file("/proc/locks");
  if (!text.ok()) return std::nullopt;
  const bool want_flock = want.kind == image::LockKind::kFlock;
  std::optional<LockLine> found;
  for_each_line(*text, [&](const std::string& line) {
    LockLine l;
    if (!parse_lock_line(line, &l) || l.waiting || l.ino != ino || l.major != major(dev) ||
        l.minor != minor(dev))
      return true;
    // flock(2) locks and record locks (POSIX, OFD) do not see each other.
    const bool record = l.kind == "POSIX" || l.kind == "OFDLCK";
    if (want_flock ? l.kind != "FLOCK" : !record) return true;
    if (!want_flock && (l.end < want.start || want.end < l.start)) return true;
    if (want.type == F_RDLCK && l.type == "READ") return true;
    found = std::move(l);
    return false;
  });
  return found;
}

std::string describe_holder(const LockLine& l) {
  if (l.pid <= 0) return "an open file description of another process (OFD lock)";
  return "PID " + std::to_string(l.pid) + " (" + comm_of(l.pid) + ")";
}

}  // namespace ckpt::proc
