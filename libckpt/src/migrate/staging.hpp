// Where cr_recv puts a stream while it arrives (docs/migration.md).
#pragma once

#include <string>

#include <ckpt/result.hpp>

#include "util/fd.hpp"

namespace ckpt::migrate {

// A private staging directory. Inside `keep_dir` when the chain is kept
// (same file system, so keeping it is a rename); else in memory, on a tmpfs
// of its own mounted with transparent huge pages where we may mount.
struct Staging {
  std::string dir;
  bool mounted = false;  // our own tmpfs is mounted on dir
  // Held (flock) while the session lives, in "DIR.lock": a receiver that
  // died is found by its free lock, not by its PID, which tells nothing
  // when it ran as PID 1 of a PID namespace.
  std::string lock_path;
  UniqueFd lock;
};

Result<Staging> make_staging(const std::string& keep_dir, const std::string& name);
void remove_staging(const Staging& s);

// Staging left by receivers that died (their PID is gone).
void remove_stale_staging();

// BASE/PREFIX<pid>-XXXXXX, mode 0700, with its lock file held by this process
// until `lock` closes (an exec or a death closes it too): what a killed tool
// leaves is found by the free lock and removed by remove_stale_locked_dirs.
Result<Staging> make_locked_dir(const std::string& base, const char* prefix);
void remove_stale_locked_dirs(const std::string& base, const char* prefix);

}  // namespace ckpt::migrate
