#include "dump/member.hpp"
#include "dump/scratch.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <future>

#include "dirty/hash.hpp"
#include "dirty/layout.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dump/advice.hpp"
#include "dump/collect.hpp"
#include "proc/credentials.hpp"
#include "proc/maps.hpp"
#include "proc/task_state.hpp"
#include "util/clock.hpp"
#include "util/phase_trace.hpp"

namespace ckpt::dump {

void plan_shared_memory(const std::vector<image::VmaRecord>& vmas,
                        const std::function<bool(const image::SharedObject&)>& saves,
                        MemoryPlan* plan) {
  std::vector<mem::Range> out;
  size_t r = 0;
  auto& in = plan->ranges;
  for (const image::VmaRecord& v : vmas) {
    // Ranges before this VMA pass through unchanged.
    while (r < in.size() && in[r].addr < v.start) out.push_back(in[r++]);
    if (!v.is_shared_anon()) continue;
    while (r < in.size() && in[r].addr < v.end) ++r;  // replaced below
    const std::optional<image::SharedObject> o = v.shared_object();
    if (saves && (!o || saves(*o))) out.push_back({v.start, v.size()});
  }
  while (r < in.size()) out.push_back(in[r++]);
  in = std::move(out);
}

dirty::TrackerState tracker_state(const MemberSpec& spec) {
  dirty::TrackerState s;
  s.target_fd = spec.prev ? spec.prev->tracker_fd : (spec.hint ? spec.hint->tracker_fd : -1);
  s.chain_id = spec.chain_id;
  s.generation = spec.generation;
  s.prev_generation = spec.prev ? spec.prev->generation : 0;
  return s;
}

std::shared_ptr<dirty::Tracker> prepare_tracker(const MemberSpec& spec, uint64_t* written) {
  std::shared_ptr<dirty::Tracker> t = dirty::make_tracker(spec.tracker, spec.tracking);
  if (t && spec.prev && spec.prev_hashes)
    t->before_freeze(spec.pid, *spec.prev_hashes, tracker_state(spec));
  if (t && written) *written = t->written_estimate(spec.pid, tracker_state(spec));
  return t;
}

Status MemberDump::prepare(const MemberSpec& spec, CheckpointStats* stats) {
  spec_ = spec;
  const pid_t pid = spec.fp->pid();
  const image::ImageMeta* prev = spec.prev;
  meta.generation = spec.generation;
  meta.chain_id = spec.chain_id;
  meta.tracker = spec.tracker;
  meta.parent_generation = prev ? prev->generation : 0;
  if (prev) meta.link.parent_digest = spec.prev_digest;
  meta.created_unix_ns = unix_now_ns();

  // Registers are captured here, before any tracker injects calls.
  const image::ImageMeta* earlier = prev ? prev : spec.hint;
  PhaseTrace pt("describe", spec.log);
  CKPT_TRY(collect_process(pid, &meta.process));
  pt.mark("process");
  CKPT_ASSIGN(auto maps, proc::read_maps(pid));
  CKPT_ASSIGN(meta.vmas, collect_vmas(pid, maps));
  pt.mark("maps+vmas");
  // smaps (the mappings' madvise state) walks every page table: read it on
  // another thread while the rest is described.
  std::vector<image::VmaRecord> advised = meta.vmas;
  auto advice = std::async(std::launch::async, [&] { return read_advice(pid, &advised); });
  CKPT_TRY(collect_mm(pid, meta.vmas, &meta.mm));
  CKPT_TRY(collect_vdso(pid, meta.vmas, &meta.vdso));
  pt.mark("mm+vdso");
  CKPT_TRY(collect_threads(*spec.fp, earlier, &meta.threads));
  pt.mark("threads");
  CKPT_ASSIGN(proc::SignalMasks masks, collect_signals(*spec.fp, meta.threads[0], &meta.process));
  pt.mark("signals");
  CKPT_ASSIGN(meta.credentials, proc::read_credentials(pid, meta.threads));
  pt.mark("credentials");
  // One session of injected calls for the handlers and the task state.
  CKPT_TRY(proc::read_task_states(pid, &meta.threads, &meta.state, &meta.credentials, masks.caught,
                                  &meta.process.sigactions));
  pt.mark("states, handlers");
  int tracker_fd =
      earlier && earlier->tracker_fd >= 0 ? earlier->tracker_fd : dirty::own_uffd_number(pid);
  if (spec.precopy && spec.precopy->tstate.target_fd >= 0)
    tracker_fd = spec.precopy->tstate.target_fd;
  CKPT_TRY(collect_files(pid, tracker_fd, &meta.files, spec.job, spec.tcp_established));
  pt.mark("files");
  CKPT_TRY(collect_scratch(pid, &meta, spec.scratch_saved, spec.scratch_max_bytes));
  pt.mark("scratch");
  utsname u;
  if (::uname(&u) == 0) meta.kernel_release = u.release;

  tracker_ =
      spec.ready_tracker ? spec.ready_tracker : dirty::make_tracker(spec.tracker, spec.tracking);
  tstate_ = tracker_state(spec);
  // The tracker's collect and the plan walk the page tables too: they run
  // while smaps is still being read, and the advice is waited for last.
  Status planned = spec.precopy ? prepare_final_live(stats) : plan_generation(stats);
  Status advised_ok = advice.get();
  CKPT_TRY(planned);
  CKPT_TRY(advised_ok);
  for (size_t i = 0; i < meta.vmas.size(); ++i) meta.vmas[i].advice = advised[i].advice;
  pt.mark("collect+plan, advice");
  return {};
}

// What a generation without pre-copy saves: for an incremental, what the
// tracker saw written since the previous one; for a full, all memory.
Status MemberDump::plan_generation(CheckpointStats* stats) {
  const pid_t pid = spec_.fp->pid();
  const image::ImageMeta* prev = spec_.prev;
  dirty::DirtySet ds;
  if (prev) {
    CKPT_ASSIGN(ds, tracker_->collect(pid, meta.vmas, prev->vmas, &tstate_));
  }
  if (prev && !ds.read_all) {
    std::vector<mem::Range> dirty;
    if (ds.everything) {
      stats->tracker_reset = ds.reason.empty() ? "tracking lost" : ds.reason;
      for (const image::VmaRecord& v : meta.vmas) dirty.push_back({v.start, v.size()});
    }
    dirty.insert(dirty.end(), ds.written.begin(), ds.written.end());
    dirty.insert(dirty.end(), ds.unknown.begin(), ds.unknown.end());
    dirty::normalize(dirty);
    CKPT_ASSIGN(plan, plan_dirty_memory(pid, meta.vmas, dirty, &meta.complete));
  } else {
    CKPT_ASSIGN(plan, plan_memory(pid, meta.vmas));
  }
  plan_shared_memory(meta.vmas, spec_.saves_shared, &plan);
  return {};
}

Status MemberDump::prepare_final_live(CheckpointStats* stats) {
  Precopy& pc = *spec_.precopy;
  tracker_ = std::move(pc.tracker);
  tstate_ = pc.tstate;
  tstate_.prev_generation = tstate_.generation;
  armed_ = true;  // a full's tracking started with the pre-copy
  // Nothing ran since a collect in this same freeze: its set is the answer.
  dirty::DirtySet ds;
  if (!pc.collected_now) {
    CKPT_ASSIGN(ds, tracker_->collect(pid(), meta.vmas, pc.layout, &tstate_));
  }
  std::vector<mem::Range> dirty = pc.pending;
  if (ds.everything) {
    if (stats->tracker_reset.empty())
      stats->tracker_reset = ds.reason.empty() ? "tracking lost" : ds.reason;
    for (const image::VmaRecord& v : meta.vmas) dirty.push_back({v.start, v.size()});
  }
  dirty.insert(dirty.end(), ds.written.begin(), ds.written.end());
  dirty.insert(dirty.end(), ds.unknown.begin(), ds.unknown.end());
  dirty.insert(dirty.end(), pc.missed.begin(), pc.missed.end());
  dirty::normalize(dirty);
  std::vector<image::MemRange> now_complete;
  CKPT_ASSIGN(plan, plan_dirty_memory(pid(), meta.vmas, dirty, &now_complete));
  plan_shared_memory(meta.vmas, spec_.saves_shared, &plan);
  for (const mem::Range& r : plan.ranges) dirty.push_back(r);
  dirty::normalize(dirty);
  // An incremental keeps the pages found empty in any round; a full has no
  // older generation they could come from.
  if (spec_.prev) {
    meta.complete = subtract(pc.complete, dirty);
    meta.complete.insert(meta.complete.end(), now_complete.begin(), now_complete.end());
    std::sort(meta.complete.begin(), meta.complete.end(),
              [](const image::MemRange& a, const image::MemRange& b) { return a.start < b.start; });
  }
  live_dirty_ = std::move(dirty);
  return {};
}

void MemberDump::disarm() {
  if (!armed_ || spec_.prev || !tracker_) return;
  armed_ = false;
  (void)tracker_->release(pid(), tstate_);
}

Status MemberDump::arm() {
  if (armed_ || spec_.prev) return {};
  armed_ = true;
  return tracker_->arm(pid(), meta.vmas, &tstate_);
}

PageSink MemberDump::sink(image::SnapshotWriter& writer) {
  static const std::vector<image::PageHash> kNone;
  // A live checkpoint's final copy adds to pages its rounds wrote already
  // (and dropped where written since): it keeps every page it reads.
  if (!spec_.precopy)
    filter_ =
        tracker_->filter(spec_.prev && spec_.prev_hashes ? *spec_.prev_hashes : kNone, writer);
  if (!filter_ && !spec_.prev && spec_.record_hashes && tracker_->wants_full_hashes()) {
    // Every page passes; the table goes into the full's addr.img.
    filter_ = std::make_unique<dirty::HashFilter>(kNone, writer);
    tstate_.full_hashes = true;
  }
  if (filter_)
    return
        [f = filter_.get()](uint64_t va, const uint8_t* d, size_t n) { return f->add(va, d, n); };
  return [&writer](uint64_t va, const uint8_t* d, size_t n) { return writer.add_pages(va, d, n); };
}

Status MemberDump::write(image::SnapshotWriter& writer, const ProgressFn& progress,
                         bool arm_after) {
  CKPT_TRY(dump_memory(pid(), plan, sink(writer), progress));
  finish_write();
  if (arm_after) CKPT_TRY(arm());
  meta.tracker_fd = tstate_.target_fd;
  return {};
}

Result<PageSink> MemberDump::capture_sink(image::SnapshotWriter& writer) {
  if (spec_.precopy) {
    // Pre-copied pages written since, and any outside today's memory (the
    // process unmapped it), leave the generation before the final copy.
    CKPT_TRY(writer.drop_pages(to_mem_ranges(live_dirty_), false));
    std::vector<image::MemRange> kept;
    for (const image::VmaRecord& v : meta.vmas)
      if (!v.is_special() && !(v.is_file() && (v.flags & image::kVmaShared)))
        kept.push_back({v.start, v.end});
    CKPT_TRY(writer.drop_pages(kept, true));
  }
  return sink(writer);
}

Status MemberDump::captured(bool arm_after) {
  if (arm_after) CKPT_TRY(arm());
  meta.tracker_fd = tstate_.target_fd;
  return {};
}

void MemberDump::finish_write() {
  if (filter_) filter_->finish(meta.vmas, &meta.complete);
}

}  // namespace ckpt::dump
