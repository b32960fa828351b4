#include "restore/spawn.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "proc/maps.hpp"
#include "restore/files.hpp"
#include "restore/new_process.hpp"
#include "util/fd.hpp"

namespace ckpt::restore {

namespace {

void child_fail(int err_fd, const std::string& msg) {
  (void)!::write(err_fd, msg.data(), msg.size());
  ::_exit(127);
}

// Runs in the child: only this process's own state is touched, then it stops.
[[noreturn]] void child_main(const image::ImageMeta& meta, PreparedFiles& files, int err_fd,
                             pid_t parent) {
  // Die with the restorer: until it has set PTRACE_O_EXITKILL, nothing else
  // would end a child that stops itself below (it would hold the PID, traced
  // by whoever inherits it). A restorer already gone before the prctl shows
  // as another parent.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::syscall(SYS_getppid) != parent)
    ::_exit(127);
  if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0)
    child_fail(err_fd, "PTRACE_TRACEME failed");
  unregister_rseq();
  // Every fd to its number, epoll sets registered, everything else closed
  // (the err pipe is kept, moved out of the way, until setup is done).
  std::string err;
  if (!install_files(files, &err_fd, &err)) child_fail(err_fd, err);
  if (!set_process_basics(meta, &err)) child_fail(err_fd, err);
  uint64_t mask = meta.threads.empty() ? 0 : meta.threads[0].sigmask;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, nullptr, 8);

  ::close(err_fd);  // EOF tells the parent that setup succeeded
  // glibc's cached TID is the parent's after a raw clone3: signal by PID, not raise().
  ::syscall(SYS_kill, ::syscall(SYS_getpid), SIGSTOP);
  ::_exit(127);  // not reached: the tracer replaces this process's whole image
}

}  // namespace

Result<pid_t> spawn_stopped(const image::ImageMeta& meta, bool new_pid) {
  PreparedFiles files;
  CKPT_TRY(prepare_files(meta, &files));

  int errp[2];
  if (::pipe2(errp, O_CLOEXEC) != 0) return sys_error("pipe");
  UniqueFd err_r(errp[0]), err_w(errp[1]);

  pid_t want = meta.process.pid;
  const pid_t parent = ::getpid();
  long pid = clone_with_pid(want, new_pid);
  if (pid < 0 && errno == EEXIST)
    return make_error(EEXIST, "PID " + std::to_string(want) +
                                  " is in use (use --new-pid to restore under another PID)");
  if (pid < 0) {
    if (errno == EPERM)
      return make_error(EPERM, "creating a process with PID " + std::to_string(want) +
                                   " needs CAP_CHECKPOINT_RESTORE or root");
    return sys_error("clone3");
  }
  if (pid == 0) child_main(meta, files, err_w.get(), parent);

  err_w.reset();
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = ::read(err_r.get(), buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) msg.append(buf, size_t(n));
  int st = 0;
  while (::waitpid(pid_t(pid), &st, __WALL) < 0 && errno == EINTR) {
  }
  if (!msg.empty() || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP) {
    ::kill(pid_t(pid), SIGKILL);
    if (WIFSTOPPED(st)) ::waitpid(pid_t(pid), &st, __WALL);
    return make_error(EIO, msg.empty() ? "the new process did not start" : msg);
  }
  // Threads are created by calls we inject (TRACECLONE attaches them); the
  // process's seccomp filters, reinstalled before its last calls, must not
  // judge those (SUSPEND_SECCOMP needs CAP_SYS_ADMIN: without, filters go last).
  long opts = PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE;
  if (::ptrace(PTRACE_SETOPTIONS, pid_t(pid), nullptr, (void*)(opts | PTRACE_O_SUSPEND_SECCOMP)) !=
          0 &&
      ::ptrace(PTRACE_SETOPTIONS, pid_t(pid), nullptr, (void*)opts) != 0) {
    Error e = sys_error("ptrace setoptions");
    ::kill(pid_t(pid), SIGKILL);
    ::waitpid(pid_t(pid), &st, __WALL);
    return e;
  }
  return pid_t(pid);
}

}  // namespace ckpt::restore
