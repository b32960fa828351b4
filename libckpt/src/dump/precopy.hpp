// A live checkpoint's pre-copy of one job member (cr_full/cr_incr --live):
// rounds that copy the pages the tracker reports into the generation being
// written while the process runs, each round replacing what earlier rounds
// copied of the pages written since. The final round (MemberDump::prepare
// with MemberSpec::precopy) is frozen and copies only what was written since
// the last round, so the generation holds the process's state at that instant.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <memory>
#include <vector>

#include "dirty/tracker.hpp"
#include "dump/memory.hpp"
#include "image/model.hpp"
#include "image/writer.hpp"

namespace ckpt::dump {

struct MemberSpec;

class Precopy {
 public:
  // The first round of a full arms tracking for the generation being
  // written (spec.generation): frozen, what needs the stop (injected calls);
  // the rest of the arm, where the tracker allows, and the plan of every
  // populated page in copy(), once the process runs again. Of an incremental,
  // it collects since spec.prev. Later rounds collect since the previous
  // round. A collect needs no freeze (spec.fp null, spec.pid): the tracker
  // reports and re-protects each page atomically, so a write racing with it
  // is either in this round's set or in the next one's. Needs a kernel
  // tracker (not "hash").
  Status plan_round(const MemberSpec& spec, CheckpointStats* stats);
  // Running: copies the planned pages into `writer`, first forgetting what
  // earlier rounds copied of them. Pages that cannot be read (the process
  // unmapped them meanwhile) are left to the final round.
  Status copy(image::SnapshotWriter& writer);
  uint64_t round_bytes() const { return plan_.bytes(); }
  int rounds() const { return rounds_; }

  // Handed to the final round.
  std::shared_ptr<dirty::Tracker> tracker;
  dirty::TrackerState tstate;
  std::vector<image::VmaRecord> layout;   // at the last collect
  std::vector<mem::Range> pending;        // collected but not copied (the last round's set)
  std::vector<mem::Range> missed;         // could not be read while running
  std::vector<image::MemRange> complete;  // dirty pages found empty (incremental)
  // The last round's collect ran in this freeze (the job has not run since):
  // the final round needs no collect of its own.
  bool collected_now = false;

 private:
  pid_t pid_ = 0;
  MemoryPlan plan_;
  // Round 1 of a full: the populated pages are planned by copy(), after the
  // release (a page populated or dropped after the arm is reported written
  // by the next collect). The shared anonymous objects this member saves.
  bool plan_at_copy_ = false;
  // Round 1 of a full, with a tracker whose install() took the stop: arm()
  // runs in copy(), once the process runs again.
  bool arm_at_copy_ = false;
  std::vector<image::SharedObject> shared_saved_;
  int rounds_ = 0;
  const LogFn* log_ = nullptr;  // the spec's, for copy()'s phases
};

// [start, end) ranges for SnapshotWriter::drop_pages.
std::vector<image::MemRange> to_mem_ranges(const std::vector<mem::Range>& r);
// a - b for MemRange lists (both sorted, disjoint).
std::vector<image::MemRange> subtract(const std::vector<image::MemRange>& a,
                                      const std::vector<mem::Range>& b);

}  // namespace ckpt::dump
