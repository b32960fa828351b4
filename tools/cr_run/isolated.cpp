#include "cr_run/isolated.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cr_run {

namespace {

// What the child reports through its pipe (plain data).
struct Report {
  int code = 0;  // 0 or a positive errno
  char message[1024] = {};
  uint64_t generation = 0, parent_generation = 0, processes = 0, bytes_written = 0,
           pages_written = 0;
  double frozen_seconds = 0, total_seconds = 0;
  char tracker[32] = {};
};

template <size_t N>
void put(char (&dst)[N], const std::string& s) {
  size_t n = std::min(N - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = 0;
}

bool full_io(int fd, void* buf, size_t len, bool write) {
  char* p = static_cast<char*>(buf);
  while (len) {
    ssize_t n = write ? ::write(fd, p, len) : ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
  }
  return true;
}

}  // namespace

ckpt::Result<ckpt::CheckpointStats> checkpoint_isolated(const ckpt::CheckpointOptions& opts,
                                                        bool full) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ckpt::sys_error("pipe");
  const pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child < 0) {
    int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ckpt::sys_error("fork", e);
  }
  if (child == 0) {
    // Dies with cr_run (a killed tool leaves its target running as before),
    // so a `cr_run --resume` never finds the job still traced by it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::close(fds[0]);
    Report rep;
    auto r = full ? ckpt::checkpoint_full(opts) : ckpt::checkpoint_incremental(opts);
    if (r.ok()) {
      rep.generation = r->generation;
      rep.parent_generation = r->parent_generation;
      rep.processes = r->processes;
      rep.bytes_written = r->bytes_written;
      rep.pages_written = r->pages_written;
      rep.frozen_seconds = r->frozen_seconds;
      rep.total_seconds = r->total_seconds;
      put(rep.tracker, r->tracker);
    } else {
      rep.code = r.error().code > 0 ? r.error().code : EIO;
      put(rep.message, r.error().message);
    }
    ::_exit(full_io(fds[1], &rep, sizeof rep, true) ? 0 : 1);
  }
  ::close(fds[1]);
  Report rep;
  bool got = full_io(fds[0], &rep, sizeof rep, false);
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(child, &st, 0) < 0 && errno == EINTR) {
  }
  if (!got)
    return ckpt::make_error(
        EIO, "the checkpointing process died (wait status " + std::to_string(st) + ")");
  if (rep.code) return ckpt::make_error(rep.code, rep.message);
  ckpt::CheckpointStats s;
  s.generation = rep.generation;
  s.parent_generation = rep.parent_generation;
  s.processes = rep.processes;
  s.bytes_written = rep.bytes_written;
  s.pages_written = rep.pages_written;
  s.frozen_seconds = rep.frozen_seconds;
  s.total_seconds = rep.total_seconds;
  s.tracker = rep.tracker;
  return s;
}

}  // namespace cr_run
