// cr_full: freeze, describe, copy memory, commit, release.
#include <sys/random.h>
#include <sys/utsname.h>

#include <ckpt/ckpt.hpp>

#include "dump/collect.hpp"
#include "dump/memory.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "proc/freeze.hpp"
#include "util/clock.hpp"

namespace ckpt {

namespace {

Status describe(pid_t pid, const proc::FrozenProcess& fp, image::ImageMeta* meta) {
  CKPT_TRY(dump::collect_process(pid, &meta->process));
  CKPT_ASSIGN(auto maps, proc::read_maps(pid));
  CKPT_ASSIGN(meta->vmas, dump::collect_vmas(pid, maps));
  CKPT_TRY(dump::collect_mm(pid, meta->vmas, &meta->mm));
  CKPT_TRY(dump::collect_vdso(pid, meta->vmas, &meta->vdso));
  CKPT_TRY(dump::collect_threads(fp, &meta->threads));
  CKPT_TRY(dump::collect_signals(fp, meta->threads[0], &meta->process));
  CKPT_TRY(dump::collect_files(pid, &meta->files));
  utsname u;
  if (::uname(&u) == 0) meta->kernel_release = u.release;
  return {};
}

}  // namespace

Result<CheckpointStats> checkpoint_full(const CheckpointOptions& opts) {
  const double t0 = now_seconds();
  CheckpointStats stats;
  CKPT_TRY(image::ensure_dir(opts.dir));
  image::remove_stale_temps(opts.dir);
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));

  const double t_frozen = now_seconds();
  CKPT_ASSIGN(std::unique_ptr<proc::FrozenProcess> fp, proc::FrozenProcess::freeze(opts.pid));

  image::ImageMeta meta;
  meta.generation = gens.empty() ? 1 : gens.back() + 1;
  if (::getrandom(meta.chain_id.data(), meta.chain_id.size(), 0) != ssize_t(meta.chain_id.size()))
    return sys_error("getrandom");
  meta.created_unix_ns = unix_now_ns();
  CKPT_TRY(describe(opts.pid, *fp, &meta));

  CKPT_ASSIGN(dump::MemoryPlan plan, dump::plan_memory(opts.pid, meta.vmas));
  CKPT_ASSIGN(auto writer, image::SnapshotWriter::create(opts.dir, meta.generation, meta.chain_id,
                                                         opts.direct_io));
  const double t_mem = now_seconds();
  CKPT_TRY(dump::dump_memory(opts.pid, plan, *writer, opts.progress));
  stats.memory_seconds = now_seconds() - t_mem;
  // Memory is copied: a running target cannot change the image any more, so
  // it goes back to work while the files are made durable. With --kill it
  // stays stopped until the checkpoint is committed.
  double t_released;
  if (opts.kill_after) {
    CKPT_TRY(writer->commit(meta));
    CKPT_TRY(fp->kill());
    t_released = now_seconds();
  } else {
    CKPT_TRY(fp->release());
    t_released = now_seconds();
    CKPT_TRY(writer->commit(meta));
  }
  const double t_end = now_seconds();

  stats.generation = meta.generation;
  stats.frozen_seconds = t_released - t_frozen;
  stats.total_seconds = t_end - t0;
  stats.vmas = meta.vmas.size();
  stats.pages_scanned = plan.pages_scanned;
  stats.pages_skipped = plan.pages_scanned - writer->pages();
  stats.pages_zero = writer->zero_pages();
  stats.pages_written = writer->pages() - writer->zero_pages();
  stats.bytes_written = writer->bytes_total();
  return stats;
}

}  // namespace ckpt
