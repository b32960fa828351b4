#include "common/pid_namespace.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace ckpt::cli {

namespace {

// What the init tells the tool once, through a pipe: the restore's outcome.
struct Outcome {
  int32_t code = 0;  // 0, or the errno of the failure
  char message[512] = {};
  pid_t pid = 0;
  uint64_t processes = 0, generation = 0, vmas = 0, pages_read = 0, pages_written = 0,
           pages_zero = 0, pages_skipped = 0, generations_read = 0, bytes_read = 0;
  double seconds = 0;
  char tracking[32] = {};
};

Outcome outcome_of(Result<RestoreStats>& r) {
  Outcome o;
  if (!r.ok()) {
    o.code = r.error().code > 0 ? r.error().code : EIO;
    std::snprintf(o.message, sizeof o.message, "%s", r.error().message.c_str());
    return o;
  }
  const RestoreStats& s = *r;
  o.pid = s.pid;
  o.processes = s.processes;
  o.generation = s.generation;
  o.vmas = s.vmas;
  o.pages_read = s.pages_read;
  o.pages_written = s.pages_written;
  o.pages_zero = s.pages_zero;
  o.pages_skipped = s.pages_skipped;
  o.generations_read = s.generations_read;
  o.bytes_read = s.bytes_read;
  o.seconds = s.seconds;
  std::snprintf(o.tracking, sizeof o.tracking, "%s", s.tracking.c_str());
  return o;
}

RestoreStats stats_of(const Outcome& o) {
  RestoreStats s;
  s.pid = o.pid;
  s.processes = o.processes;
  s.generation = o.generation;
  s.vmas = o.vmas;
  s.pages_read = o.pages_read;
  s.pages_written = o.pages_written;
  s.pages_zero = o.pages_zero;
  s.pages_skipped = o.pages_skipped;
  s.generations_read = o.generations_read;
  s.bytes_read = o.bytes_read;
  s.seconds = o.seconds;
  s.tracking = o.tracking;
  return s;
}

// The namespace's own /proc, in a mount namespace whose mounts do not
// propagate back (mounts made outside still reach it).
const char* private_proc() {
  if (::unshare(CLONE_NEWNS) != 0) return "unshare(CLONE_NEWNS)";
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0)
    return "making / a slave mount";
  if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return "mounting /proc";
  return nullptr;
}

volatile sig_atomic_t g_root = 0;

void pass_on(int sig) {
  if (g_root > 0) ::kill(g_root, sig);
}

// The init's life after the restore: every process of the namespace reaped
// until none is left, then the root's status as its own.
[[noreturn]] void reap(pid_t root) {
  g_root = root;
  struct sigaction sa {};
  sa.sa_handler = pass_on;
  for (int s : {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(s, &sa, nullptr);
  int code = 0;
  for (;;) {
    int st = 0;
    pid_t p = ::waitpid(-1, &st, 0);
    if (p < 0 && errno == EINTR) continue;
    if (p < 0) break;
    if (p == root) code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ::_exit(code);
}

[[noreturn]] void init_main(RestoreOptions opts, int report_fd) {
  // Dies with the tool until the job runs; from then on it outlives it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  Result<RestoreStats> r = make_error(EIO, "");
  if (const char* what = private_proc())
    r = sys_error(std::string("a PID namespace for the job: ") + what);
  else
    r = restore_process(opts);
  const Outcome o = outcome_of(r);
  (void)!::write(report_fd, &o, sizeof o);
  ::close(report_fd);
  if (!r.ok()) ::_exit(1);
  ::prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
  reap(r->pid);
}

// The init's only child is the root (every other member is the child of a
// member): its PID as the caller sees it.
pid_t first_child(pid_t init) {
  std::ifstream f("/proc/" + std::to_string(init) + "/task/" + std::to_string(init) + "/children");
  pid_t p = 0;
  f >> p;
  return p;
}

}  // namespace

Result<NamespacedRestore> restore_in_pid_namespace(RestoreOptions opts) {
  opts.new_pid = false;  // every PID is free in the new namespace
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return sys_error("pipe");
  // Only the children made from here on are in the new namespace.
  if (::unshare(CLONE_NEWPID) != 0) {
    const int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    return sys_error("a PID namespace for the job: unshare(CLONE_NEWPID)", e);
  }
  const pid_t init = ::fork();
  if (init < 0) {
    const int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    return sys_error("fork", e);
  }
  if (init == 0) {
    ::close(p[0]);
    init_main(std::move(opts), p[1]);
  }
  ::close(p[1]);
  Outcome o;
  ssize_t n;
  do n = ::read(p[0], &o, sizeof o);
  while (n < 0 && errno == EINTR);
  ::close(p[0]);
  if (n != ssize_t(sizeof o) || o.code != 0) {
    int st;
    while (::waitpid(init, &st, 0) < 0 && errno == EINTR) {
    }
    if (n != ssize_t(sizeof o)) return make_error(EIO, "the PID namespace's init died");
    return make_error(o.code, o.message);
  }
  NamespacedRestore out;
  out.init = init;
  out.root = first_child(init);
  out.stats = stats_of(o);
  return out;
}

}  // namespace ckpt::cli
