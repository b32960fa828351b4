#include "dump/precopy.hpp"

#include <algorithm>

#include "dirty/layout.hpp"
#include "dump/capture.hpp"
#include "dump/collect.hpp"
#include "dump/member.hpp"
#include "proc/maps.hpp"
#include "util/phase_trace.hpp"

namespace ckpt::dump {

std::vector<image::MemRange> to_mem_ranges(const std::vector<mem::Range>& r) {
  std::vector<image::MemRange> out;
  out.reserve(r.size());
  for (const mem::Range& x : r) out.push_back({x.addr, x.end()});
  return out;
}

std::vector<image::MemRange> subtract(const std::vector<image::MemRange>& a,
                                      const std::vector<mem::Range>& b) {
  std::vector<mem::Range> ar;
  for (const image::MemRange& x : a) ar.push_back({x.start, x.end - x.start});
  return to_mem_ranges(dirty::subtract(ar, b));
}

Status Precopy::plan_round(const MemberSpec& spec, CheckpointStats* stats) {
  const pid_t pid = pid_ = spec.fp ? spec.fp->pid() : spec.pid;
  log_ = spec.log;
  PhaseTrace pt("plan_round", log_);
  CKPT_ASSIGN(auto maps, proc::read_maps(pid));
  CKPT_ASSIGN(std::vector<image::VmaRecord> vmas, collect_vmas(pid, maps));
  pt.mark("maps+vmas");
  std::vector<mem::Range> dirty;
  if (rounds_ == 0) {
    tracker =
        spec.ready_tracker ? spec.ready_tracker : dirty::make_tracker(spec.tracker, spec.tracking);
    if (!tracker) return make_error(ENOTSUP, "a live checkpoint needs a kernel dirty tracker");
    tstate.chain_id = spec.chain_id;
    tstate.generation = spec.generation;
    if (!spec.prev) {
      // From this instant every write is tracked; everything populated is copied.
      tstate.target_fd = spec.hint ? spec.hint->tracker_fd : -1;
      if (!spec.fp) return make_error(EINVAL, "internal error: arming needs the process frozen");
      // What needs the stop is set up now; the protection of every page, the
      // long part, waits for the release when the tracker allows (copy()).
      CKPT_ASSIGN(arm_at_copy_, tracker->install(pid, &tstate));
      if (!arm_at_copy_) CKPT_TRY(tracker->arm(pid, vmas, &tstate));
      pt.mark(arm_at_copy_ ? "install" : "arm");
      shared_saved_.clear();
      for (const image::VmaRecord& v : vmas)
        if (auto o = v.shared_object(); o && spec.saves_shared && spec.saves_shared(*o))
          shared_saved_.push_back(*o);
      plan_ = {};
      plan_at_copy_ = true;
      layout = std::move(vmas);
      ++rounds_;
      return {};
    }
    tstate.target_fd = spec.prev->tracker_fd;
    tstate.prev_generation = spec.prev->generation;
  } else {
    // The tracking now belongs to this generation (the ledger says so).
    tstate.prev_generation = tstate.generation;
  }
  CKPT_ASSIGN(dirty::DirtySet ds,
              tracker->collect(pid, vmas, rounds_ == 0 ? spec.prev->vmas : layout, &tstate));
  pt.mark("collect");
  if (ds.everything) {
    if (stats->tracker_reset.empty())
      stats->tracker_reset = ds.reason.empty() ? "tracking lost" : ds.reason;
    for (const image::VmaRecord& v : vmas) dirty.push_back({v.start, v.size()});
  }
  dirty.insert(dirty.end(), ds.written.begin(), ds.written.end());
  dirty.insert(dirty.end(), ds.unknown.begin(), ds.unknown.end());
  dirty::normalize(dirty);
  std::vector<image::MemRange> round_complete;
  CKPT_ASSIGN(plan_, plan_dirty_memory(pid, vmas, dirty, &round_complete));
  plan_shared_memory(vmas, spec.saves_shared, &plan_);
  pt.mark("plan");
  // Shared anonymous memory is re-read whole: it belongs to this round's set.
  for (const mem::Range& r : plan_.ranges) dirty.push_back(r);
  dirty::normalize(dirty);
  complete = subtract(complete, dirty);
  complete.insert(complete.end(), round_complete.begin(), round_complete.end());
  std::sort(complete.begin(), complete.end(),
            [](const image::MemRange& a, const image::MemRange& b) { return a.start < b.start; });
  missed = dirty::subtract(missed, dirty);
  pending = std::move(dirty);
  layout = std::move(vmas);
  ++rounds_;
  collected_now = true;
  return {};
}

Status Precopy::copy(image::SnapshotWriter& writer) {
  if (arm_at_copy_) {
    // Tracking starts here; the plan below reads which pages are populated
    // after it, so a page populated or dropped meanwhile is in this round's
    // copy or in the next collect.
    arm_at_copy_ = false;
    PhaseTrace pt("round (running)", log_);
    CKPT_TRY(tracker->arm(pid_, layout, &tstate));
    pt.mark("arm");
  }
  if (plan_at_copy_) {
    plan_at_copy_ = false;
    CKPT_ASSIGN(plan_, plan_memory(pid_, layout));
    const std::vector<image::SharedObject> saved = shared_saved_;
    plan_shared_memory(
        layout,
        [&saved](const image::SharedObject& o) {
          return std::find(saved.begin(), saved.end(), o) != saved.end();
        },
        &plan_);
  }
  CKPT_TRY(writer.drop_pages(to_mem_ranges(pending), false));
  pending.clear();
  collected_now = false;
  Capture cap(4 * kBatchBytes);
  cap.resume();  // the process runs: reading and writing overlap
  std::vector<mem::Range> lost;
  CKPT_TRY(cap.read(
      pid_, plan_,
      [&writer](uint64_t va, const uint8_t* d, size_t n) { return writer.add_pages(va, d, n); }, {},
      0, 0, &lost));
  CKPT_TRY(cap.finish());
  missed.insert(missed.end(), lost.begin(), lost.end());
  dirty::normalize(missed);
  return {};
}

}  // namespace ckpt::dump
