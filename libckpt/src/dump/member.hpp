// One process's part of a generation: described while it is frozen, its
// memory planned (all of it, or what the tracker says changed), then read
// into its own writer. A job checkpoint runs one per member; a migration
// round runs one for its process.
#pragma once

#include <sys/types.h>

#include <array>
#include <ckpt/ckpt.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dirty/tracker.hpp"
#include "dump/capture.hpp"
#include "dump/memory.hpp"
#include "dump/precopy.hpp"
#include "dump/scratch.hpp"
#include "image/model.hpp"
#include "image/writer.hpp"
#include "proc/freeze.hpp"

namespace ckpt::dump {

struct MemberSpec {
  const proc::FrozenProcess* fp = nullptr;
  // Without fp: a pre-copy round of this process while it runs
  // (Precopy::plan_round, a collect only).
  pid_t pid = 0;
  const image::ImageMeta* prev = nullptr;  // this process at the parent generation (incremental)
  const std::vector<image::PageHash>* prev_hashes = nullptr;  // its page-hash table (hash tracker)
  uint64_t prev_digest = 0;  // digest of prev's meta.img: bound into this generation's link
  const image::ImageMeta* hint = nullptr;  // full: an earlier generation of the same process
  std::string tracker;                     // the chain's tracker
  TrackingOptions tracking;                // how it tracks (CheckpointOptions::tracking)
  const LogFn* log = nullptr;              // phase times (CheckpointOptions::log)
  uint64_t generation = 0;
  std::array<uint8_t, 16> chain_id{};
  std::vector<pid_t> job;        // every member's PID
  bool tcp_established = false;  // save connections to peers outside the job (repair mode)
  // Shared anonymous memory (by the object's inode): true when this member
  // saves the object's content; the others map it without content.
  std::function<bool(const image::SharedObject&)> saves_shared;
  // Scratch files (tmpfs) read so far by the job's members (null: this
  // member saves all it holds).
  ScratchSaved* scratch_saved = nullptr;
  uint64_t scratch_max_bytes = uint64_t(512) << 20;  // CheckpointOptions::scratch_max_bytes
  // A full records its pages' hashes when its tracker wants them (a first
  // incremental then verifies sampled blocks by content: dirty/adaptive.hpp).
  // Not for a live checkpoint or a migration, whose next collect comes
  // without before_freeze().
  bool record_hashes = false;
  // An incremental: the tracker that ran before_freeze() on this process.
  std::shared_ptr<dirty::Tracker> ready_tracker;
  // The final round of a live checkpoint: the pre-copy of this member (its
  // tracker, layout and pages already in the writer). Only what was written
  // since its last round is read.
  Precopy* precopy = nullptr;
};

// The tracker state of `spec`'s process at its parent generation (or, for a
// full, at the hint's).
dirty::TrackerState tracker_state(const MemberSpec& spec);
// Before an incremental's freeze, while `spec.pid` runs: the chain's tracker
// after its before_freeze(), for MemberSpec::ready_tracker; with `written`,
// also its estimate of the bytes the collect will report (0: unknown).
std::shared_ptr<dirty::Tracker> prepare_tracker(const MemberSpec& spec,
                                                uint64_t* written = nullptr);

class MemberDump {
 public:
  // Describes the frozen process and plans which of its pages to read.
  Status prepare(const MemberSpec& spec, CheckpointStats* stats);
  // Starts tracking (a new chain) before the process may run again.
  Status arm();
  // Reads the planned pages into `writer`; with `arm_after`, a full starts
  // tracking once its memory is read (an incremental's collect re-armed).
  Status write(image::SnapshotWriter& writer, const ProgressFn& progress, bool arm_after);

  // The same in steps, for a job that is released as soon as every
  // member's pages are copied into the tool's buffers, all frozen:
  // capture_sink (where the pages go), then Capture::read of `plan` into
  // it, which may run on another thread while captured (arms a full's
  // tracking: ptrace, so on the tracer's thread) runs; finish_write after
  // capture.finish() (the target may run).
  Result<PageSink> capture_sink(image::SnapshotWriter& writer);
  Status captured(bool arm_after);
  void finish_write();
  // A full that fails after its tracking was armed (here, or by its live
  // rounds) takes it back, the process still frozen: a checkpoint that
  // fails leaves no userfaultfd behind.
  void disarm();

  pid_t pid() const { return spec_.fp->pid(); }
  // Pages read that the tracker's filter found as the parent has them.
  uint64_t pages_unchanged() const { return filter_ ? filter_->pages_unchanged() : 0; }
  image::ImageMeta meta;
  MemoryPlan plan;

 private:
  Status prepare_final_live(CheckpointStats* stats);
  Status plan_generation(CheckpointStats* stats);
  // The sink of the pages read: the writer, behind the tracker's filter
  // when it has one.
  PageSink sink(image::SnapshotWriter& writer);
  MemberSpec spec_;
  std::shared_ptr<dirty::Tracker> tracker_;
  dirty::TrackerState tstate_;
  bool armed_ = false;
  std::unique_ptr<dirty::ContentFilter> filter_;
  std::vector<mem::Range> live_dirty_;  // final live round: what replaces pre-copied pages
};

// Shared anonymous memory in a plan: the member that saves an object reads
// every page of its mappings (other members may have written pages this
// one never touched, which its page tables do not show); the others read
// none of it.
void plan_shared_memory(const std::vector<image::VmaRecord>& vmas,
                        const std::function<bool(const image::SharedObject&)>& saves,
                        MemoryPlan* plan);

}  // namespace ckpt::dump
