#include "restore/job_spawn.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "proc/freeze.hpp"
#include "restore/new_process.hpp"
#include "util/fd.hpp"

namespace ckpt::restore {

namespace {

// What each new process reports on the shared status pipe: one record
// (atomic: smaller than PIPE_BUF) when it is ready or has failed.
struct Report {
  int32_t pid;
  int32_t failed;
  int32_t err;  // the errno a failure stands for (EEXIST: a PID is taken)
  char msg[244];
};

struct Ctx {
  const std::vector<SpawnMember>* members;
  int status_fd;
  bool new_pid;
};

void report(int fd, bool failed, int err, const char* fmt, const char* detail = "") {
  Report r{};
  r.pid = int32_t(::syscall(SYS_getpid));
  r.failed = failed;
  r.err = err;
  std::snprintf(r.msg, sizeof r.msg, fmt, int(r.pid), detail);
  (void)!::write(fd, &r, sizeof r);
}

[[noreturn]] void fail(int fd, const char* fmt, const char* detail = "", int err = EIO) {
  report(fd, true, err, fmt, detail);
  ::_exit(127);
}

[[noreturn]] void member_main(const Ctx& ctx, size_t i, pid_t parent);

// Forks member `i` as a child of the calling process. Returns its PID or -errno.
long fork_member(const Ctx& ctx, size_t i) {
  const pid_t parent = pid_t(::syscall(SYS_getpid));
  long pid = restore::clone_with_pid(ctx.members->at(i).member->pid, ctx.new_pid);
  if (pid < 0) return -errno;
  if (pid == 0) member_main(ctx, i, parent);
  return pid;
}

// A zombie exits as it did: by its signal (no core file) or with its status.
[[noreturn]] void die_as(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::syscall(SYS_kill, ::syscall(SYS_getpid), sig);
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 0);
}

[[noreturn]] void member_main(const Ctx& ctx, size_t i, pid_t parent) {
  const SpawnMember& sm = ctx.members->at(i);
  const image::JobMember& m = *sm.member;
  int fd = ctx.status_fd;
  // Dies with its parent until restored (the restorer, or the member that
  // made it): a restorer killed mid-way leaves nothing behind. The real
  // parent-death signal is restored with the rest of the process's state.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (::getppid() != parent) ::_exit(127);
  // A restorer given CAP_CHECKPOINT_RESTORE as a file capability runs
  // undumpable, and so would this child: the restorer could not trace it.
  // The saved dumpable flag is set at the end of the restore.
  ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  // Nothing is delivered before the process's own mask is loaded; SIGCHLD
  // of zombie children made below is drained.
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, nullptr);

  if (m.sid == m.pid && ::setsid() < 0) fail(fd, "PID %d: setsid: %s", std::strerror(errno));
  if (m.sid == m.pid && sm.ctty_fd >= 0 && ::ioctl(sm.ctty_fd, TIOCSCTTY, 0) != 0)
    fail(fd, "PID %d: taking its controlling terminal (TIOCSCTTY): %s", std::strerror(errno));
  if (m.sid != m.pid && m.pgid == m.pid && ::setpgid(0, 0) != 0)
    fail(fd, "PID %d: setpgid: %s", std::strerror(errno));
  // Its group exists now, in the session (SIGTTOU is blocked: no stop).
  if (sm.foreground && sm.ctty_fd >= 0 && ::ioctl(sm.ctty_fd, TIOCSPGRP, &m.pid) != 0)
    fail(fd, "PID %d: making its group the foreground one (TIOCSPGRP): %s", std::strerror(errno));
  if ((m.flags & image::kMemberNoCtty) && sm.ctty_fd >= 0 && !m.zombie())
    (void)::ioctl(sm.ctty_fd, TIOCNOTTY);

  // Children are made before this process sets up its own descriptors:
  // they inherit the restorer's prepared files and pick their own.
  bool zombies = false;
  for (size_t c = 0; c < ctx.members->size(); ++c) {
    const image::JobMember& cm = *ctx.members->at(c).member;
    if (c == i || cm.ppid != m.pid || c == 0) continue;
    long pid = fork_member(ctx, c);
    if (pid < 0) {
      char what[64];
      std::snprintf(what, sizeof what, "%d", int(cm.pid));
      if (-pid == EEXIST)
        fail(fd, "PID %d: cannot recreate child PID %s: it is in use", what, EEXIST);
      fail(fd, "PID %d: creating child PID %s failed", what);
    }
    if (cm.zombie()) {
      siginfo_t si;
      ::waitid(P_PID, id_t(pid), &si, WEXITED | WNOWAIT);
      zombies = true;
    }
  }
  if (zombies) {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    timespec zero{};
    while (::sigtimedwait(&chld, nullptr, &zero) == SIGCHLD) {
    }
  }
  if (m.zombie()) {
    ::close(fd);
    die_as(m.exit_status);
  }

  const image::ImageMeta& meta = *sm.meta;
  restore::unregister_rseq();
  std::string err;
  if (!restore::install_files(*sm.files, &fd, &err)) fail(fd, "PID %d: %s", err.c_str());
  if (!restore::set_process_basics(meta, &err)) fail(fd, "PID %d: %s", err.c_str());
  report(fd, false, 0, "PID %d ready");
  ::close(fd);
  // Wait to be seized; the restorer replaces this whole image.
  for (;;) ::syscall(SYS_pause);
}

Status seize(pid_t pid) {
  const long opts = PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE;
  // The process's seccomp filters, reinstalled before its last calls, must
  // not judge the calls we inject (SUSPEND_SECCOMP needs CAP_SYS_ADMIN:
  // without, filters go last).
  if (::ptrace(PTRACE_SEIZE, pid, nullptr, (void*)(opts | PTRACE_O_SUSPEND_SECCOMP)) != 0 &&
      ::ptrace(PTRACE_SEIZE, pid, nullptr, (void*)opts) != 0)
    return sys_error("ptrace seize of new process " + std::to_string(pid));
  // A signal it stopped for on the way is dropped: the restorer replaces
  // this whole image, its handlers included.
  auto stop = proc::stop_seized_thread(pid);
  if (!stop.ok()) {
    if (stop.error().code == ESRCH)
      return make_error(EIO, "new process " + std::to_string(pid) + " died");
    return stop.error().context("stopping new process " + std::to_string(pid));
  }
  return {};
}

}  // namespace

void kill_job(const std::vector<pid_t>& pids) {
  for (size_t i = pids.size(); i-- > 0;)
    if (pids[i] > 0) ::kill(pids[i], SIGKILL);
  if (!pids.empty() && pids[0] > 0) {
    int ws;
    while (::waitpid(pids[0], &ws, __WALL) > 0 && !WIFEXITED(ws) && !WIFSIGNALED(ws)) {
    }
  }
}

Result<std::vector<pid_t>> spawn_job(const std::vector<SpawnMember>& members, bool new_pid) {
  // A job's members know each other by PID: only a job of one may take another.
  const bool any_pid = new_pid && members.size() == 1;
  int sp[2];
  if (::pipe2(sp, O_CLOEXEC) != 0) return sys_error("pipe");
  UniqueFd status_r(sp[0]), status_w(sp[1]);
  Ctx ctx{&members, status_w.get(), any_pid};
  long root = fork_member(ctx, 0);
  if (root < 0) {
    const pid_t want = members[0].member->pid;
    if (-root == EEXIST)
      return make_error(EEXIST, "PID " + std::to_string(want) + " is in use" +
                                    (new_pid ? " (a job's members keep their PIDs)"
                                             : " (use --new-pid to restore under another PID)"));
    if (-root == EPERM)
      return make_error(EPERM, "creating a process with PID " + std::to_string(want) +
                                   " needs CAP_CHECKPOINT_RESTORE or root");
    return make_error(int(-root), std::string("clone3: ") + std::strerror(int(-root)));
  }
  status_w.reset();

  // Every live member reports once; EOF comes when all have (or died).
  std::vector<pid_t> pids(members.size(), 0);
  pids[0] = pid_t(root);
  size_t ready = 0, live = 0;
  for (const SpawnMember& m : members) live += m.member->zombie() ? 0 : 1;
  std::string failure;
  int failure_code = EIO;
  Report r;
  for (;;) {
    ssize_t n = ::read(status_r.get(), &r, sizeof r);
    if (n < 0 && errno == EINTR) continue;
    if (n != ssize_t(sizeof r)) break;
    if (r.failed && failure.empty()) {
      failure = r.msg;
      failure_code = r.err > 0 ? r.err : EIO;
    }
    if (!r.failed) ++ready;
  }
  if (failure.empty() && ready != live) failure = "a new process died while being set up";
  if (!failure.empty()) {
    // Only the root is killed by PID: the others die with their parents
    // (PDEATHSIG), and a PID we failed to take belongs to somebody else.
    kill_job(pids);
    return make_error(failure_code, failure);
  }
  for (size_t i = 1; i < members.size(); ++i) pids[i] = members[i].member->pid;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].member->zombie()) continue;
    Status s = seize(pids[i]);
    if (!s.ok()) {
      kill_job(pids);
      return s.error();
    }
  }
  return pids;
}

}  // namespace ckpt::restore
