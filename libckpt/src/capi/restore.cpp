// ckpt_restore: attached (the restored root is the caller's child) or
// detached (restored by a short-lived intermediate child that exits at once,
// so the job is reparented to the nearest subreaper or init).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "capi/handle.hpp"

namespace {

using namespace ckpt::capi;

// What the intermediate process reports through its pipe.
struct DetachReport {
  int code = 0;  // 0 or a positive errno
  ckpt_restore_stats stats{};
  char message[512] = {};
};

void fill(const ckpt::RestoreStats& r, ckpt_restore_stats& s) {
  s.pid = r.pid;
  s.processes = r.processes;
  s.generation = r.generation;
  s.generations_read = r.generations_read;
  s.seconds = r.seconds;
  s.pages_read = r.pages_read;
  s.pages_written = r.pages_written;
  s.bytes_read = r.bytes_read;
}

ckpt::Result<ckpt_restore_stats> restore_detached(const ckpt::RestoreOptions& opts) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ckpt::sys_error("pipe");
  pid_t mid = ::fork();
  if (mid < 0) {
    int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ckpt::sys_error("fork", e);
  }
  if (mid == 0) {
    ::close(fds[0]);
    DetachReport rep;
    auto r = ckpt::restore_process(opts);
    if (r.ok()) {
      fill(*r, rep.stats);
    } else {
      rep.code = r.error().code > 0 ? r.error().code : EINVAL;
      copy_str(rep.message, r.error().message);
    }
    const char* p = reinterpret_cast<const char*>(&rep);
    size_t left = sizeof rep;
    while (left) {
      ssize_t n = ::write(fds[1], p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      p += n;
      left -= size_t(n);
    }
    ::_exit(0);  // the restored job is orphaned here, never waited for
  }
  ::close(fds[1]);
  DetachReport rep;
  char* p = reinterpret_cast<char*>(&rep);
  size_t got = 0;
  while (got < sizeof rep) {
    ssize_t n = ::read(fds[0], p + got, sizeof rep - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(mid, &st, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof rep)
    return ckpt::make_error(EIO, "the detached restore's intermediate process died (status " +
                                     std::to_string(st) + ")");
  if (rep.code) return ckpt::make_error(rep.code, rep.message);
  return rep.stats;
}

}  // namespace

extern "C" int ckpt_restore(ckpt_ctx* ctx, const struct ckpt_restore_opts* in,
                            struct ckpt_restore_stats* out) {
  if (int rc = check_ctx(ctx, "ckpt_restore")) return rc;
  ckpt_restore_opts o;
  if (int rc = read_opts(ctx, in, CKPT_RESTORE_OPTS_SIZE_V1, o, "ckpt_restore_opts")) return rc;
  if (int rc = check_out(ctx, out, "ckpt_restore_stats")) return rc;
  if (int rc = check_dir(ctx, o.dir, "ckpt_restore")) return rc;
  constexpr unsigned known = CKPT_RESTORE_NEW_PID | CKPT_RESTORE_FORCE | CKPT_RESTORE_DETACH;
  if (o.flags & ~known) return fail(ctx, EINVAL, "ckpt_restore: unknown flags");

  ckpt::RestoreOptions opts;
  opts.dir = o.dir;
  opts.generation = o.generation;
  opts.new_pid = o.flags & CKPT_RESTORE_NEW_PID;
  opts.force = o.flags & CKPT_RESTORE_FORCE;
  opts.progress = progress(ctx, CKPT_PHASE_RESTORE);
  ckpt_restore_stats s{};
  if (o.flags & CKPT_RESTORE_DETACH) {
    auto r = restore_detached(opts);
    if (!r.ok()) return fail(ctx, r.error());
    s = *r;
  } else {
    auto r = ckpt::restore_process(opts);
    if (!r.ok()) return fail(ctx, r.error());
    fill(*r, s);
  }
  write_out(s, out);
  return ok(ctx);
}
