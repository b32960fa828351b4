// One process's generation written in one go (a migration round): freeze,
// describe, copy memory, release, commit. cr_full/cr_incr go through the job
// code (job/checkpoint.cpp), which runs the same MemberDump per member.
#include <sys/random.h>

#include <ckpt/check.hpp>
#include <ckpt/ckpt.hpp>

#include "dirty/ledger.hpp"
#include "dirty/tracker.hpp"
#include "dump/generation.hpp"
#include "dump/member.hpp"
#include "dump/vma_flags.hpp"
#include "proc/tree.hpp"
#include "util/clock.hpp"
#include "util/text.hpp"

namespace ckpt::dump {

// The tracker of a new chain: `auto` is the best one this kernel supports.
Result<std::string> choose_tracker(const std::string& want) {
  if (want == "auto") return std::string(auto_tracker().name);
  const TrackerInfo* t = find_tracker(want);
  if (!t) return make_error(EINVAL, "unknown tracker " + want);
  FeatureCheck c = dirty::probe_tracker(t->kind);
  if (!c.ok) return make_error(ENOTSUP, "tracker " + want + " unusable here: " + c.detail);
  return want;
}

Result<std::string> chain_tracker(const CheckpointOptions& opts, const image::ImageMeta* prev) {
  if (!prev) return choose_tracker(opts.tracker);
  std::string tracker = prev->tracker.empty() ? "hash" : prev->tracker;
  // The metadata is input: a name this build does not know (a newer build's
  // tracker, or damage) has no kernel side to continue from.
  if (!find_tracker(tracker))
    return make_error(EBADMSG, "the chain names dirty tracker " + printable(tracker) +
                                   ", which this build does not know: start a new chain "
                                   "with cr_full");
  if (opts.tracker != "auto" && opts.tracker != tracker)
    return make_error(EINVAL, "this chain uses the " + tracker +
                                  " tracker; start a new chain with cr_full --tracker " +
                                  opts.tracker);
  return tracker;
}

Status new_chain_id(std::array<uint8_t, 16>* id) {
  if (::getrandom(id->data(), id->size(), 0) != ssize_t(id->size())) return sys_error("getrandom");
  return {};
}

void add_member_stats(const MemberDump& m, const image::SnapshotWriter& w, CheckpointStats* s) {
  s->vmas += m.meta.vmas.size();
  s->pages_scanned += m.plan.pages_scanned;
  s->pages_skipped += m.plan.pages_scanned - std::min(m.plan.pages_scanned, w.pages());
  s->pages_zero += w.zero_pages();
  s->pages_written += w.pages() - w.zero_pages();
  s->pages_unchanged += m.pages_unchanged();
  s->bytes_written += w.bytes_total();
}

namespace {

// What MemberDump needs to save the one process of `opts`, frozen as `fp`.
Result<MemberSpec> member_spec(const CheckpointOptions& opts, const GenerationSpec& spec,
                               const proc::FrozenProcess* fp, const std::string& tracker) {
  MemberSpec ms;
  ms.fp = fp;
  ms.prev = spec.prev;
  ms.prev_hashes = spec.prev_hashes;
  ms.hint = spec.hint;
  ms.prev_digest = spec.prev_digest;
  ms.tracker = tracker;
  ms.tracking = opts.tracking;
  ms.log = &opts.log;
  ms.generation = spec.generation;
  if (spec.prev)
    ms.chain_id = spec.prev->chain_id;
  else
    CKPT_TRY(new_chain_id(&ms.chain_id));
  ms.job = {opts.pid};
  ms.scratch_max_bytes = opts.scratch_max_bytes;
  ms.saves_shared = [](const image::SharedObject&) { return true; };
  return ms;
}

// Memory is copied: a running target cannot change the image any more, so
// it goes back to work while the files are made durable. With --kill it
// stays stopped until the checkpoint is committed. A pre-copy round's
// target runs already. *t_released: when it was let go or killed here.
Status commit_and_release(bool kill, bool precopy, const GenerationSpec& spec,
                          proc::FrozenProcess& fp, image::SnapshotWriter& writer,
                          const image::ImageMeta& meta, dirty::LedgerHold& hints,
                          double* t_released) {
  if (kill) {
    CKPT_TRY(writer.commit(meta));
    if (spec.before_kill) CKPT_TRY(spec.before_kill());
    CKPT_TRY(fp.kill());
    *t_released = now_seconds();
  } else if (precopy) {
    CKPT_TRY(writer.commit(meta));
  } else {
    CKPT_TRY(fp.release());
    *t_released = now_seconds();
    hints.write();
    CKPT_TRY(writer.commit(meta));
  }
  return {};
}

}  // namespace

Result<CheckpointStats> write_generation(const CheckpointOptions& opts, const GenerationSpec& spec,
                                         GenerationOut* out) {
  const double t0 = now_seconds();
  CheckpointStats stats;
  CKPT_ASSIGN(std::string tracker, chain_tracker(opts, spec.prev));

  // A process with children would lose them: migration moves single
  // processes so far (proc/tree names the child).
  CKPT_TRY(proc::list_job(opts.pid, false));
  (void)vma_flags_available();  // its first use loads it: not in the freeze
  dirty::LedgerHold hints;      // until the target runs again (before `fp`: released first)
  const double t_frozen = now_seconds();
  CKPT_ASSIGN(std::unique_ptr<proc::FrozenProcess> fp, proc::FrozenProcess::freeze(opts.pid));

  CKPT_ASSIGN(MemberSpec ms, member_spec(opts, spec, fp.get(), tracker));
  MemberDump md;
  CKPT_TRY(md.prepare(ms, &stats));

  // When the target runs again: after its memory is read (cr_full), after the
  // commit (--kill, a migration's final round), or before the read (pre-copy).
  bool kill = opts.kill_after, precopy = false;
  if (spec.decide_final) {
    kill = spec.decide_final(md.plan.bytes());
    precopy = !kill;
  }
  out->final = kill;
  out->t_frozen = t_frozen;
  out->plan_bytes = md.plan.bytes();

  CKPT_ASSIGN(auto writer, spec.open(md.meta));
  double t_released = 0;
  if (precopy) {
    // Tracking must cover every write from now on, before the target runs.
    CKPT_TRY(md.arm());
    CKPT_TRY(fp->release());
    t_released = now_seconds();
    hints.write();
  }
  const double t_mem = now_seconds();
  md.meta.link.binds_job = true;  // a job of one: its link says it has no job.img
  CKPT_TRY(md.write(*writer, opts.progress, !kill && !precopy));
  stats.memory_seconds = now_seconds() - t_mem;
  CKPT_TRY(commit_and_release(kill, precopy, spec, *fp, *writer, md.meta, hints, &t_released));

  stats.generation = md.meta.generation;
  stats.parent_generation = md.meta.parent_generation;
  stats.tracker = tracker;
  stats.processes = 1;
  stats.frozen_seconds = t_released - t_frozen;
  stats.total_seconds = now_seconds() - t0;
  add_member_stats(md, *writer, &stats);
  out->page_hashes = writer->page_hashes();
  out->meta_digest = writer->meta_digest();
  out->meta = std::move(md.meta);
  return stats;
}

}  // namespace ckpt::dump
