// One generation written by the checkpoint code, with the choices a caller
// other than cr_full/cr_incr needs (migration): where the generation goes (a
// directory or a stream), which generation it builds on (from memory, not
// from a directory), and when the target runs again.
#pragma once

#include <ckpt/ckpt.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "image/model.hpp"
#include "image/writer.hpp"

namespace ckpt::dump {

struct GenerationSpec {
  uint64_t generation = 1;
  std::array<uint8_t, 16> chain_id{};      // of an incremental; a full draws a new one
  const image::ImageMeta* prev = nullptr;  // incremental on this generation (nullptr: full)
  uint64_t prev_digest = 0;                // its meta.img digest (the chain link names it)
  const std::vector<image::PageHash>* prev_hashes = nullptr;  // its page-hash table (hash tracker)
  const image::ImageMeta* hint = nullptr;  // full: an earlier generation of the same process
  // Opens this generation's writer once its metadata is known (frozen).
  std::function<Result<std::unique_ptr<image::SnapshotWriter>>(const image::ImageMeta&)> open;
  // Unset: cr_full/cr_incr behaviour (opts.kill_after decides). Set (migration):
  // called frozen with the bytes this round will read; true makes it the
  // final round (stays frozen, commits, before_kill, then the target is
  // killed), false a pre-copy round (the target runs again before its memory
  // is read; pages it writes meanwhile are dirty for the next round).
  std::function<bool(uint64_t plan_bytes)> decide_final;
  // Final round: runs after the commit, target still frozen. An error
  // releases the target untouched instead of killing it.
  std::function<Status()> before_kill;
};

// What the next round needs: this generation's metadata and page hashes.
struct GenerationOut {
  image::ImageMeta meta;
  std::vector<image::PageHash> page_hashes;
  uint64_t meta_digest = 0;  // of the committed meta.img: the next round's prev_digest
  bool final = false;       // the target was killed (or, on error, released)
  double t_frozen = 0;      // now_seconds() when the freeze began
  uint64_t plan_bytes = 0;  // bytes the round read
};

Result<CheckpointStats> write_generation(const CheckpointOptions& opts, const GenerationSpec& spec,
                                         GenerationOut* out);

// The tracker a new chain gets for `want` (auto: the best this kernel has).
Result<std::string> choose_tracker(const std::string& want);
// The tracker of the chain `prev` belongs to (a new one's when null);
// refuses an explicit --tracker that differs from the chain's.
Result<std::string> chain_tracker(const CheckpointOptions& opts, const image::ImageMeta* prev);
// A fresh random chain identity.
Status new_chain_id(std::array<uint8_t, 16>* id);

class MemberDump;
// Adds one member's counts (its plan and what its writer wrote) to `s`.
void add_member_stats(const MemberDump& m, const image::SnapshotWriter& w, CheckpointStats* s);

}  // namespace ckpt::dump
