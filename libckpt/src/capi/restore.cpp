// ckpt_restore: attached (the restored root is the caller's child) or
// detached (restored by a short-lived intermediate child that exits at once,
// so the job is reparented to the nearest subreaper or init).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "capi/handle.hpp"
#include "util/fd.hpp"

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

bool write_all(int fd, const void* data, size_t len) {
  return ckpt::write_all(fd, data, len, "the detached restore's pipe").ok();
}

bool read_all(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  while (len) {
    ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
  }
  return true;
}

// The intermediate process's messages on its pipe: progress ('P', done,
// total) any number of times, then the report ('R').
constexpr char kProgress = 'P', kReport = 'R';

// The restore runs in an intermediate process (so that the job is not the
// caller's child); its progress comes back through the pipe and the
// caller's callback runs here, on the calling thread, as ckpt.h promises.
ckpt::Result<ckpt_restore_stats> restore_detached(ckpt::RestoreOptions opts) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ckpt::sys_error("pipe");
  const ckpt::ProgressFn progress = std::move(opts.progress);
  pid_t mid = ::fork();
  if (mid < 0) {
    int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ckpt::sys_error("fork", e);
  }
  if (mid == 0) {
    ::close(fds[0]);
    if (progress) {
      const int out = fds[1];
      opts.progress = [out](uint64_t done, uint64_t total) {
        char rec[1 + 2 * sizeof(uint64_t)];
        rec[0] = kProgress;
        std::memcpy(rec + 1, &done, sizeof done);
        std::memcpy(rec + 1 + sizeof done, &total, sizeof total);
        (void)write_all(out, rec, sizeof rec);
      };
    }
    DetachReport rep;
    auto r = ckpt::restore_process(opts);
    if (r.ok()) {
      fill(*r, rep.stats);
    } else {
      rep.code = r.error().code > 0 ? r.error().code : EINVAL;
      copy_str(rep.message, r.error().message);
    }
    if (write_all(fds[1], &kReport, 1)) (void)write_all(fds[1], &rep, sizeof rep);
    ::_exit(0);  // the restored job is orphaned here, never waited for
  }
  ::close(fds[1]);
  DetachReport rep;
  bool reported = false;
  for (char kind; !reported && read_all(fds[0], &kind, 1);) {
    if (kind == kReport) {
      reported = read_all(fds[0], &rep, sizeof rep);
      break;
    }
    uint64_t done = 0, total = 0;
    if (kind != kProgress || !read_all(fds[0], &done, sizeof done) ||
        !read_all(fds[0], &total, sizeof total))
      break;
    if (progress) progress(done, total);
  }
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(mid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!reported)
    return ckpt::make_error(EIO, "the detached restore's intermediate process died (status " +
                                     std::to_string(st) + ")");
  if (rep.code) return ckpt::make_error(rep.code, rep.message);
  return rep.stats;
}

}  // namespace

extern "C" int ckpt_restore(ckpt_ctx* ctx, const struct ckpt_restore_opts* in,
                            struct ckpt_restore_stats* out) {
  return guarded(ctx, "ckpt_restore", [&]() -> int {
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
  });
}
