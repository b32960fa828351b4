// cr_recv's restore for a live migration: the process is built from the
// first (full) generation as soon as it arrives, kept stopped, and brought
// up to date with each incremental while the sender still pre-copies
// (restore/in_place: only the pages each generation holds are written). When
// the final generation arrives only its few pages, the registers and the
// small state remain: the downtime no longer includes building the whole
// address space.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <memory>
#include <string>
#include <vector>

#include "restore/restore_held.hpp"

namespace ckpt::migrate {

// Where a run of content landed in a generation's pages.img while it arrives.
struct LandedRun {
  uint64_t vaddr = 0, bytes = 0;
  uint64_t offset = 0;  // in the content (after pages.img's header)
};

class WarmRestore {
 public:
  WarmRestore(std::string staging, bool new_pid);
  ~WarmRestore();

  // Metadata first (docs/migration.md): builds the process's mappings from
  // the layout the full generation `gen` announced (`tmp_dir`/layout.img,
  // before its memory), then writes each run as it lands in
  // `tmp_dir`/pages.img. add(gen) then checks that the committed generation
  // is exactly what was written (same layout, same runs, same hashes) and
  // only finishes it.
  Status begin_layout(uint64_t gen, const std::string& tmp_dir);
  Status write_landed(const std::vector<LandedRun>& runs);
  // Whether the process was built while its first generation arrived.
  bool built_early() const { return built_early_; }

  // Applies generation `gen` (committed in the staging directory; the first
  // call must be the chain's full generation, then each next one in order).
  Status add(uint64_t gen);
  uint64_t last() const { return last_; }
  pid_t pid() const { return pid_; }  // the process being built (0: none)
  // Lets the process run in the state of the last generation added;
  // `before_release` is called as restore_held calls it.
  Result<RestoreStats> finish(const restore::ReleaseHook& before_release = {});
  // Kills the half-built process, if any.
  void abort();

 private:
  struct Early;
  Status finish_early(uint64_t gen);

  std::unique_ptr<Early> early_;
  bool built_early_ = false;
  std::string staging_;
  bool new_pid_;
  pid_t pid_ = 0;
  uint64_t last_ = 0;
  uint64_t pages_written_ = 0;
};

}  // namespace ckpt::migrate
