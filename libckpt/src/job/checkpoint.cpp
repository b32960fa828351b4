// cr_full / cr_incr: which generation a checkpoint writes and on top of
// which (a full claims the directory and starts a chain; an incremental
// continues the newest generation of the same job), then the checkpoint
// itself (job/pipeline).
#include <ckpt/ckpt.hpp>
#include <memory>

#include "dump/arena.hpp"
#include "dump/chain_owner.hpp"
#include "image/generation_dir.hpp"
#include "image/store.hpp"
#include "job/checkpoint.hpp"
#include "job/pipeline.hpp"
#include "job/previous.hpp"
#include "job/round_hooks.hpp"
#include "util/clock.hpp"

namespace ckpt {

namespace {

using job::PreviousJob;

Result<CheckpointStats> checkpoint_job(const CheckpointOptions& opts, const PreviousJob* prev,
                                       uint64_t generation, double t0,
                                       const PreviousJob* hint = nullptr,
                                       const job::CommittedHook& committed = {},
                                       const job::RoundHooks* hooks = nullptr) {
  job::JobCheckpoint c({opts, prev, generation, t0, hint, committed, hooks});
  return c.run();
}

}  // namespace

namespace job {

Result<CheckpointStats> checkpoint_round(const CheckpointOptions& opts, uint64_t first_generation,
                                         const CommittedHook& committed) {
  const double t0 = now_seconds();
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  if (gens.empty())
    return checkpoint_job(opts, nullptr, first_generation ? first_generation : 1, t0, nullptr,
                          committed);
  CKPT_ASSIGN(PreviousJob prev, job::open_previous(image::generation_dir(opts.dir, gens.back())));
  if (prev.job.members[0].pid != opts.pid)
    return make_error(
        EINVAL, opts.dir + " holds checkpoints of PID " + std::to_string(prev.job.members[0].pid));
  return checkpoint_job(opts, &prev, gens.back() + 1, t0, nullptr, committed);
}

}  // namespace job

namespace {

Result<CheckpointStats> full_round(const CheckpointOptions& opts, const job::RoundHooks* hooks) {
  const double t0 = now_seconds();
  CKPT_TRY(image::ensure_dir(opts.dir));
  image::remove_stale_temps(opts.dir);
  std::string moved_aside;
  CKPT_TRY(dump::claim_directory(opts.dir, opts.pid, opts.force, &moved_aside));
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  // An earlier generation of the same job says what a thread found in
  // restart_syscall is waiting in.
  std::unique_ptr<PreviousJob> newest;
  if (!gens.empty())
    if (auto r = job::open_previous(image::generation_dir(opts.dir, gens.back()));
        r.ok() && r->job.members[0].pid == opts.pid)
      newest = std::make_unique<PreviousJob>(std::move(*r));
  CKPT_ASSIGN(CheckpointStats stats,
              checkpoint_job(opts, nullptr, gens.empty() ? 1 : gens.back() + 1, t0, newest.get(),
                             {}, hooks));
  // Without fsync the new full may not survive a power loss: the chain it
  // supersedes stays until a durable full (or cr_compact) replaces it.
  if (!opts.no_sync) image::remove_generations_before(opts.dir, stats.generation);
  stats.moved_aside = moved_aside;
  return stats;
}

Result<CheckpointStats> incremental_round(const CheckpointOptions& opts,
                                          const job::RoundHooks* hooks) {
  const double t0 = now_seconds();
  auto gens = image::list_generations(opts.dir);
  if (!gens.ok() || gens->empty())
    return make_error(ENOENT, "no checkpoint chain in " + opts.dir +
                                  ": an incremental needs a full checkpoint first (cr_full)");
  image::remove_stale_temps(opts.dir);
  CKPT_ASSIGN(PreviousJob prev, job::open_previous(image::generation_dir(opts.dir, gens->back())));
  if (prev.job.members[0].pid != opts.pid)
    return make_error(EINVAL, opts.dir + " holds checkpoints of PID " +
                                  std::to_string(prev.job.members[0].pid) + ", not of " +
                                  std::to_string(opts.pid));
  const image::ImageMeta& root = prev.root()->meta();
  if ((root.tracker.empty() || root.tracker == "hash"))
    for (auto& [pid, r] : prev.members)
      if (r->page_hashes().empty() && !r->runs().empty())
        return make_error(EINVAL, "generation " + std::to_string(gens->back()) +
                                      " carries no page hashes: take a new full checkpoint");
  // The chain's scope stays what cr_full chose.
  CheckpointOptions o = opts;
  o.tree = opts.tree || (prev.job.members[0].flags & image::kMemberTree);
  return checkpoint_job(o, &prev, gens->back() + 1, t0, nullptr, {}, hooks);
}

}  // namespace

Result<CheckpointStats> checkpoint_full(const CheckpointOptions& opts) {
  return full_round(opts, nullptr);
}

Result<CheckpointStats> checkpoint_incremental(const CheckpointOptions& opts) {
  return incremental_round(opts, nullptr);
}

void release_buffers() {
  dump::release_arenas();
}

Result<CheckpointStats> job::hooked_round(const CheckpointOptions& opts, bool full,
                                          const RoundHooks& hooks) {
  return full ? full_round(opts, &hooks) : incremental_round(opts, &hooks);
}

}  // namespace ckpt
