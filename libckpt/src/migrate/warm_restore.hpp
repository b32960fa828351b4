// cr_recv's restore for a live migration: the process is built from the
// first (full) generation as soon as it arrives, kept stopped, and brought
// up to date with each incremental while the sender still pre-copies
// (pause/in_place: only the pages each generation holds are written). When
// the final generation arrives only its few pages, the registers and the
// small state remain: the downtime no longer includes building the whole
// address space.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <string>

#include "restore/restore_held.hpp"

namespace ckpt::migrate {

class WarmRestore {
 public:
  WarmRestore(std::string staging, bool new_pid)
      : staging_(std::move(staging)), new_pid_(new_pid) {}
  ~WarmRestore() { abort(); }

  // Applies generation `gen` (committed in the staging directory; the first
  // call must be the chain's full generation, then each next one in order).
  Status add(uint64_t gen);
  uint64_t last() const { return last_; }
  // Lets the process run in the state of the last generation added;
  // `before_release` is called as restore_held calls it.
  Result<RestoreStats> finish(const restore::ReleaseHook& before_release = {});
  // Kills the half-built process, if any.
  void abort();

 private:
  std::string staging_;
  bool new_pid_;
  pid_t pid_ = 0;
  uint64_t last_ = 0;
  uint64_t pages_written_ = 0;
};

}  // namespace ckpt::migrate
