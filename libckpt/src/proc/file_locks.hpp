// File locks as /proc shows them: the "lock:" lines of /proc/PID/fdinfo/N
// (the locks held through that open file) and /proc/locks (every lock of the
// system), which print the same line.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "image/model.hpp"

namespace ckpt::proc {

struct LockLine {
  std::string kind;  // FLOCK, POSIX, OFDLCK, LEASE, ACCESS, DELEG, LAYOUT...
  std::string type;  // READ, WRITE, UNLCK
  int pid = 0;       // in the reader's PID namespace; -1 for OFD locks
  unsigned major = 0, minor = 0;
  uint64_t ino = 0;
  uint64_t start = 0, end = image::kLockToEof;
  bool waiting = false;  // /proc/locks: a request blocked on the lock above it ("->")
};

// One line after its "lock:" or "N:" prefix; false if it is not a lock line.
bool parse_lock_line(const std::string& line, LockLine* out);

// The locks an fdinfo text lists.
std::vector<LockLine> fdinfo_locks(const std::string& fdinfo);

// A lock of /proc/locks on the file (dev, ino) that would stop `want` from
// being taken by someone who holds nothing there yet.
std::optional<LockLine> conflicting_lock(dev_t dev, uint64_t ino, const image::FileLock& want);

// "PID 12 (comm)", or "an open file description (OFD lock)" for pid -1.
std::string describe_holder(const LockLine& l);

}  // namespace ckpt::proc
