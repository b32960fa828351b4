// ckpt_checkpoint_full / ckpt_checkpoint_incremental over ckpt::checkpoint_*.
#include "capi/handle.hpp"

namespace {

using namespace ckpt::capi;

int checkpoint(ckpt_ctx* ctx, const ckpt_checkpoint_opts* in, ckpt_checkpoint_stats* out, bool full,
               const char* call) {
  if (int rc = check_ctx(ctx, call)) return rc;
  ckpt_checkpoint_opts o;
  if (int rc = read_opts(ctx, in, CKPT_CHECKPOINT_OPTS_SIZE_V1, o, "ckpt_checkpoint_opts"))
    return rc;
  if (int rc = check_out(ctx, out, "ckpt_checkpoint_stats")) return rc;
  if (o.compress_level < 0 || o.compress_level > 19)
    return fail(ctx, EINVAL, std::string(call) + ": compress_level is not 0 (off) or 1 to 19");
  if (int rc = check_dir(ctx, o.dir, call)) return rc;
  if (o.pid <= 0) return fail(ctx, EINVAL, std::string(call) + ": no target PID given");
  constexpr unsigned known = CKPT_TREE | CKPT_KILL | CKPT_DIRECT | CKPT_FORCE |
                             CKPT_TCP_ESTABLISHED | CKPT_LIVE | CKPT_NO_SYNC;
  if (o.flags & ~known) return fail(ctx, EINVAL, std::string(call) + ": unknown flags");
  if (o.flags & CKPT_FORCE && !full)
    return fail(ctx, EINVAL, std::string(call) + ": CKPT_FORCE is for full checkpoints");

  ckpt::CheckpointOptions opts;
  opts.dir = o.dir;
  opts.pid = o.pid;
  opts.tree = o.flags & CKPT_TREE;
  opts.kill_after = o.flags & CKPT_KILL;
  opts.direct_io = o.flags & CKPT_DIRECT;
  opts.force = o.flags & CKPT_FORCE;
  opts.tcp_established = o.flags & CKPT_TCP_ESTABLISHED;
  opts.live = o.flags & CKPT_LIVE;
  opts.no_sync = o.flags & CKPT_NO_SYNC;
  if (o.tracker) opts.tracker = o.tracker;
  opts.compress_level = o.compress_level;
  opts.progress = progress(ctx, CKPT_PHASE_CHECKPOINT);
  auto r = full ? ckpt::checkpoint_full(opts) : ckpt::checkpoint_incremental(opts);
  if (!r.ok()) return fail(ctx, r.error());

  ckpt_checkpoint_stats s{};
  s.generation = r->generation;
  s.parent_generation = r->parent_generation;
  s.processes = r->processes;
  s.frozen_seconds = r->frozen_seconds;
  s.memory_seconds = r->memory_seconds;
  s.total_seconds = r->total_seconds;
  s.vmas = r->vmas;
  s.pages_scanned = r->pages_scanned;
  s.pages_skipped = r->pages_skipped;
  s.pages_written = r->pages_written;
  s.pages_zero = r->pages_zero;
  s.bytes_written = r->bytes_written;
  copy_str(s.tracker, r->tracker);
  s.tracking_reset = !r->tracker_reset.empty();
  write_out(s, out);
  return ok(ctx);
}

}  // namespace

extern "C" int ckpt_checkpoint_full(ckpt_ctx* ctx, const struct ckpt_checkpoint_opts* opts,
                                    struct ckpt_checkpoint_stats* stats) {
  return guarded(ctx, "ckpt_checkpoint_full", [&]() -> int {
    return checkpoint(ctx, opts, stats, true, "ckpt_checkpoint_full");
  });
}

extern "C" int ckpt_checkpoint_incremental(ckpt_ctx* ctx, const struct ckpt_checkpoint_opts* opts,
                                           struct ckpt_checkpoint_stats* stats) {
  return guarded(ctx, "ckpt_checkpoint_incremental", [&]() -> int {
    return checkpoint(ctx, opts, stats, false, "ckpt_checkpoint_incremental");
  });
}

extern "C" void ckpt_release_buffers(void) {
  ckpt::release_buffers();
}
