// ckpt_pause and ckpt_migrate: a live process or job rolled back or moved
// to another node.
#include <ckpt/migrate.hpp>
#include <ckpt/pause.hpp>

#include "capi/handle.hpp"

using namespace ckpt::capi;

extern "C" int ckpt_pause(ckpt_ctx* ctx, const struct ckpt_pause_opts* in,
                          struct ckpt_pause_stats* out) {
  return guarded(ctx, "ckpt_pause", [&]() -> int {
    if (int rc = check_ctx(ctx, "ckpt_pause")) return rc;
    ckpt_pause_opts o;
    if (int rc = read_opts(ctx, in, CKPT_PAUSE_OPTS_SIZE_V1, o, "ckpt_pause_opts")) return rc;
    if (int rc = check_out(ctx, out, "ckpt_pause_stats")) return rc;
    if (int rc = check_dir(ctx, o.dir, "ckpt_pause")) return rc;
    if (o.pid <= 0) return fail(ctx, EINVAL, "ckpt_pause: no target PID given");
    if (o.flags & ~unsigned(CKPT_PAUSE_TREE)) return fail(ctx, EINVAL, "ckpt_pause: unknown flags");
    ckpt::PauseOptions opts;
    opts.dir = o.dir;
    opts.pid = o.pid;
    opts.tree = o.flags & CKPT_PAUSE_TREE;
    auto r = ckpt::pause_process(opts);
    if (!r.ok()) return fail(ctx, r.error());
    ckpt_pause_stats s{};
    s.generation = r->generation;
    s.pages_compared = r->pages_compared;
    s.pages_written = r->pages_written;
    s.pages_dropped = r->pages_dropped;
    s.frozen_seconds = r->frozen_seconds;
    s.seconds = r->seconds;
    s.processes = r->processes;
    s.pid = r->pid;
    s.restarted = r->how == "restart";
    write_out(s, out);
    return ok(ctx);
  });
}

extern "C" int ckpt_migrate(ckpt_ctx* ctx, const struct ckpt_migrate_opts* in,
                            struct ckpt_migrate_stats* out) {
  return guarded(ctx, "ckpt_migrate", [&]() -> int {
    if (int rc = check_ctx(ctx, "ckpt_migrate")) return rc;
    ckpt_migrate_opts o;
    if (int rc = read_opts(ctx, in, CKPT_MIGRATE_OPTS_SIZE_V1, o, "ckpt_migrate_opts")) return rc;
    if (int rc = check_out(ctx, out, "ckpt_migrate_stats")) return rc;
    if (!o.to || !*o.to) return fail(ctx, EINVAL, "ckpt_migrate: no destination given");
    if (!o.token_file || !*o.token_file)
      return fail(ctx, EINVAL, "ckpt_migrate: no token file given");
    if (o.pid <= 0) return fail(ctx, EINVAL, "ckpt_migrate: no target PID given");
    constexpr unsigned known = CKPT_MIGRATE_LIVE | CKPT_MIGRATE_TREE | CKPT_MIGRATE_TCP_ESTABLISHED;
    if (o.flags & ~known) return fail(ctx, EINVAL, "ckpt_migrate: unknown flags");
    if ((o.flags & CKPT_MIGRATE_TCP_ESTABLISHED) && !(o.flags & CKPT_MIGRATE_TREE))
      return fail(ctx, EINVAL,
                  "ckpt_migrate: CKPT_MIGRATE_TCP_ESTABLISHED needs CKPT_MIGRATE_TREE");
    if (o.timeout_seconds < 0 || o.deadline_seconds < 0)
      return fail(ctx, EINVAL, "ckpt_migrate: negative timeout or deadline");
    ckpt::MigrateOptions opts;
    opts.to = o.to;
    opts.token_file = o.token_file;
    opts.pid = o.pid;
    opts.live = o.flags & CKPT_MIGRATE_LIVE;
    opts.tree = o.flags & CKPT_MIGRATE_TREE;
    opts.tcp_established = o.flags & CKPT_MIGRATE_TCP_ESTABLISHED;
    if (o.tracker) opts.tracker = o.tracker;
    if (o.timeout_seconds > 0) opts.timeout_seconds = o.timeout_seconds;
    if (o.deadline_seconds > 0) opts.deadline_seconds = o.deadline_seconds;
    opts.progress = progress(ctx, CKPT_PHASE_MIGRATE);
    auto r = ckpt::migrate_process(opts);
    if (!r.ok()) return fail(ctx, r.error());
    ckpt_migrate_stats s{};
    s.remote_pid = r->remote_pid;
    s.rounds = r->rounds.size();
    s.bytes_total = r->bytes_total;
    s.migration_seconds = r->migration_seconds;
    s.downtime_seconds = r->downtime_seconds;
    s.processes = r->processes;
    write_out(s, out);
    return ok(ctx);
  });
}
