// cr_full / cr_incr: freeze, describe, copy memory, release, commit.
#include <sys/random.h>
#include <sys/utsname.h>

#include <algorithm>
#include <ckpt/check.hpp>
#include <ckpt/ckpt.hpp>

#include "dirty/kmod.hpp"
#include "dirty/layout.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dirty/soft_dirty.hpp"
#include "dump/chain_owner.hpp"
#include "dump/collect.hpp"
#include "dump/generation.hpp"
#include "dump/hash_filter.hpp"
#include "dump/memory.hpp"
#include "image/format.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "proc/freeze.hpp"
#include "proc/task_state.hpp"
#include "util/clock.hpp"

namespace ckpt {

namespace {

Status describe(pid_t pid, const proc::FrozenProcess& fp, const image::ImageMeta* previous,
                image::ImageMeta* meta) {
  CKPT_TRY(dump::collect_process(pid, &meta->process));
  CKPT_ASSIGN(auto maps, proc::read_maps(pid));
  CKPT_ASSIGN(meta->vmas, dump::collect_vmas(pid, maps));
  CKPT_TRY(dump::collect_mm(pid, meta->vmas, &meta->mm));
  CKPT_TRY(dump::collect_vdso(pid, meta->vmas, &meta->vdso));
  CKPT_TRY(dump::collect_threads(fp, previous, &meta->threads));
  CKPT_TRY(dump::collect_signals(fp, meta->threads[0], &meta->process));
  CKPT_TRY(proc::read_task_states(pid, &meta->threads, &meta->state));
  int tracker_fd = previous && previous->tracker_fd >= 0 ? previous->tracker_fd : dirty::kTrackerFd;
  CKPT_TRY(dump::collect_files(pid, tracker_fd, &meta->files));
  utsname u;
  if (::uname(&u) == 0) meta->kernel_release = u.release;
  return {};
}

}  // namespace

namespace dump {

// The tracker of a new chain: `auto` is the best one this kernel supports.
Result<std::string> choose_tracker(const std::string& want) {
  if (want == "hash") return want;
  if (want != "auto" && want != "kmod" && want != "pagemap-scan" && want != "soft-dirty")
    return make_error(EINVAL, "unknown tracker " + want);
  for (const char* t : {"kmod", "pagemap-scan", "soft-dirty"}) {
    if (want != "auto" && want != t) continue;
    std::string n = t;
    FeatureCheck c = n == "kmod"           ? dirty::KmodTracker::probe()
                     : n == "pagemap-scan" ? dirty::PagemapScanTracker::probe()
                                           : dirty::SoftDirtyTracker::probe();
    if (c.ok) return n;
    if (want != "auto")
      return make_error(ENOTSUP, "tracker " + want + " unusable here: " + c.detail);
  }
  return std::string("hash");
}

// The parts of a full and an incremental checkpoint that are the same.
Result<CheckpointStats> write_generation(const CheckpointOptions& opts, const GenerationSpec& spec,
                                         GenerationOut* out) {
  const double t0 = now_seconds();
  const image::ImageMeta* prev = spec.prev;
  CheckpointStats stats;
  std::string tracker;
  if (prev) {
    tracker = prev->tracker.empty() ? "hash" : prev->tracker;
    if (opts.tracker != "auto" && opts.tracker != tracker)
      return make_error(EINVAL, "this chain uses the " + tracker +
                                    " tracker; start a new chain with cr_full --tracker " +
                                    opts.tracker);
  } else {
    CKPT_ASSIGN(tracker, choose_tracker(opts.tracker));
  }
  const bool hashing = tracker == "hash";

  const double t_frozen = now_seconds();
  CKPT_ASSIGN(std::unique_ptr<proc::FrozenProcess> fp, proc::FrozenProcess::freeze(opts.pid));

  image::ImageMeta meta;
  meta.generation = spec.generation;
  meta.tracker = tracker;
  if (prev) {
    meta.parent_generation = prev->generation;
    meta.chain_id = prev->chain_id;
    meta.link.parent_digest = spec.prev_digest;
  } else if (::getrandom(meta.chain_id.data(), meta.chain_id.size(), 0) !=
             ssize_t(meta.chain_id.size())) {
    return sys_error("getrandom");
  }
  meta.created_unix_ns = unix_now_ns();
  // Registers are captured here, before any tracker injects calls.
  CKPT_TRY(describe(opts.pid, *fp, prev ? prev : spec.hint, &meta));

  std::unique_ptr<dirty::Tracker> tracker_impl = dirty::make_tracker(tracker);
  dirty::TrackerState tstate;
  tstate.target_fd = prev ? prev->tracker_fd : (spec.hint ? spec.hint->tracker_fd : -1);
  tstate.chain_id = meta.chain_id;
  tstate.generation = meta.generation;
  tstate.prev_generation = prev ? prev->generation : 0;
  MemoryPlan plan;
  if (prev && !hashing) {
    CKPT_ASSIGN(dirty::DirtySet ds,
                tracker_impl->collect(opts.pid, meta.vmas, prev->vmas, &tstate));
    std::vector<mem::Range> dirty;
    if (ds.everything) {
      stats.tracker_reset = ds.reason.empty() ? "tracking lost" : ds.reason;
      for (const image::VmaRecord& v : meta.vmas) dirty.push_back({v.start, v.size()});
    }
    dirty.insert(dirty.end(), ds.written.begin(), ds.written.end());
    dirty.insert(dirty.end(), ds.unknown.begin(), ds.unknown.end());
    dirty::normalize(dirty);
    CKPT_ASSIGN(plan, plan_dirty_memory(opts.pid, meta.vmas, dirty, &meta.complete));
  } else {
    CKPT_ASSIGN(plan, plan_memory(opts.pid, meta.vmas));
  }

  // When the target runs again: after its memory is read (cr_full), after the
  // commit (--kill, a migration's final round), or before the read (pre-copy).
  bool kill = opts.kill_after, precopy = false;
  if (spec.decide_final) {
    kill = spec.decide_final(plan.bytes());
    precopy = !kill;
  }
  out->final = kill;
  out->t_frozen = t_frozen;
  out->plan_bytes = plan.bytes();

  CKPT_ASSIGN(auto writer, spec.open(meta));
  static const std::vector<image::PageHash> kNone;
  HashFilter filter(prev && hashing && spec.prev_hashes ? *spec.prev_hashes : kNone, *writer);
  double t_released = 0;
  if (precopy) {
    // Tracking must cover every write from now on, before the target runs.
    if (!prev && !hashing) CKPT_TRY(tracker_impl->arm(opts.pid, meta.vmas, &tstate));
    CKPT_TRY(fp->release());
    t_released = now_seconds();
  }
  const double t_mem = now_seconds();
  if (hashing) {
    CKPT_TRY(dump_memory(
        opts.pid, plan,
        [&](uint64_t va, const uint8_t* d, size_t n) { return filter.add(va, d, n); },
        opts.progress));
    filter.finish(meta.vmas, &meta.complete);
  } else {
    CKPT_TRY(dump_memory(
        opts.pid, plan,
        [&](uint64_t va, const uint8_t* d, size_t n) { return writer->add_pages(va, d, n); },
        opts.progress));
    // A full starts tracking now; an incremental's collect() already re-armed.
    if (!prev && !kill && !precopy) CKPT_TRY(tracker_impl->arm(opts.pid, meta.vmas, &tstate));
    meta.tracker_fd = tstate.target_fd;
  }
  stats.memory_seconds = now_seconds() - t_mem;

  // Memory is copied: a running target cannot change the image any more, so
  // it goes back to work while the files are made durable. With --kill it
  // stays stopped until the checkpoint is committed.
  if (kill) {
    CKPT_TRY(writer->commit(meta));
    if (spec.before_kill) CKPT_TRY(spec.before_kill());
    CKPT_TRY(fp->kill());
    t_released = now_seconds();
  } else if (precopy) {
    CKPT_TRY(writer->commit(meta));
  } else {
    CKPT_TRY(fp->release());
    t_released = now_seconds();
    CKPT_TRY(writer->commit(meta));
  }
  const double t_end = now_seconds();

  stats.generation = meta.generation;
  stats.parent_generation = meta.parent_generation;
  stats.tracker = tracker;
  stats.frozen_seconds = t_released - t_frozen;
  stats.total_seconds = t_end - t0;
  stats.vmas = meta.vmas.size();
  stats.pages_scanned = plan.pages_scanned;
  stats.pages_skipped = plan.pages_scanned - writer->pages();
  stats.pages_zero = writer->zero_pages();
  stats.pages_written = writer->pages() - writer->zero_pages();
  stats.bytes_written = writer->bytes_total();
  out->page_hashes = writer->page_hashes();
  out->meta_digest = writer->meta_digest();
  out->meta = std::move(meta);
  return stats;
}

}  // namespace dump

namespace {

Result<CheckpointStats> checkpoint(const CheckpointOptions& opts, const image::SnapshotReader* prev,
                                   uint64_t generation, double t0,
                                   const image::ImageMeta* hint = nullptr) {
  dump::GenerationSpec spec;
  spec.generation = generation;
  spec.prev = prev ? &prev->meta() : nullptr;
  spec.prev_hashes = prev ? &prev->page_hashes() : nullptr;
  spec.prev_digest = prev ? prev->meta_digest() : 0;
  spec.hint = hint;
  spec.open = [&](const image::ImageMeta& m) {
    return image::SnapshotWriter::create(opts.dir, m.generation, m.chain_id, opts.direct_io);
  };
  dump::GenerationOut out;
  CKPT_ASSIGN(CheckpointStats stats, dump::write_generation(opts, spec, &out));
  stats.total_seconds = now_seconds() - t0;
  return stats;
}

}  // namespace

Result<CheckpointStats> checkpoint_full(const CheckpointOptions& opts) {
  const double t0 = now_seconds();
  CKPT_TRY(image::ensure_dir(opts.dir));
  image::remove_stale_temps(opts.dir);
  std::string moved_aside;
  CKPT_TRY(dump::claim_directory(opts.dir, opts.pid, opts.force, &moved_aside));
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  // An earlier generation of the same process says what a thread found in
  // restart_syscall is waiting in.
  std::unique_ptr<image::SnapshotReader> newest;
  if (!gens.empty())
    if (auto r = image::SnapshotReader::open(image::generation_dir(opts.dir, gens.back()));
        r.ok() && (*r)->meta().process.pid == opts.pid)
      newest = std::move(*r);
  CKPT_ASSIGN(CheckpointStats stats, checkpoint(opts, nullptr, gens.empty() ? 1 : gens.back() + 1,
                                                t0, newest ? &newest->meta() : nullptr));
  image::remove_generations_before(opts.dir, stats.generation);
  stats.moved_aside = moved_aside;
  return stats;
}

Result<CheckpointStats> checkpoint_incremental(const CheckpointOptions& opts) {
  const double t0 = now_seconds();
  auto gens = image::list_generations(opts.dir);
  if (!gens.ok() || gens->empty())
    return make_error(ENOENT, "no checkpoint chain in " + opts.dir +
                                  ": an incremental needs a full checkpoint first (cr_full)");
  image::remove_stale_temps(opts.dir);
  CKPT_ASSIGN(auto prev,
              image::SnapshotReader::open(image::generation_dir(opts.dir, gens->back())));
  if (prev->meta().process.pid != opts.pid)
    return make_error(EINVAL, opts.dir + " holds checkpoints of PID " +
                                  std::to_string(prev->meta().process.pid) + ", not of " +
                                  std::to_string(opts.pid));
  if ((prev->meta().tracker.empty() || prev->meta().tracker == "hash") &&
      prev->page_hashes().empty() && !prev->runs().empty())
    return make_error(EINVAL, "generation " + std::to_string(gens->back()) +
                                  " carries no page hashes: take a new full checkpoint");
  return checkpoint(opts, prev.get(), gens->back() + 1, t0);
}

}  // namespace ckpt
