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
#include "util/fd.hpp"

namespace ckpt::restore {

namespace {

struct PreparedFile {
  int target;    // fd number in the restored process
  int source;    // fd in this process holding the open file (-1: inherit our own `target`)
  int fd_flags;  // FD_CLOEXEC
};

// Opens every file of the image here, before any process exists, so a missing
// file fails the restore cleanly.
Result<std::vector<PreparedFile>> prepare_files(const image::ImageMeta& meta,
                                                std::vector<UniqueFd>& owned) {
  std::vector<PreparedFile> out;
  for (const image::FileRecord& f : meta.files) {
    const std::string what = "fd " + std::to_string(f.fd) + ": " + f.path;
    switch (f.kind) {
      case image::FileKind::kInheritStdio:
        if (::fcntl(f.fd, F_GETFD) < 0)
          return make_error(EBADF, what + ": the restoring process has no fd " +
                                       std::to_string(f.fd) + " to connect it to");
        out.push_back({f.fd, -1, int(f.fd_flags)});
        break;
      case image::FileKind::kRegular:
      case image::FileKind::kCharDevice: {
        int flags = int(f.flags) & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
        UniqueFd fd(::open(f.path.c_str(), flags | O_CLOEXEC));
        if (!fd.valid()) return sys_error("reopening " + what);
        if (f.kind == image::FileKind::kRegular &&
            ::lseek(fd.get(), off_t(f.offset), SEEK_SET) != off_t(f.offset) && errno != ESPIPE)
          return sys_error("seeking " + what);
        out.push_back({f.fd, fd.get(), int(f.fd_flags)});
        owned.push_back(std::move(fd));
        break;
      }
      default:
        return make_error(ENOTSUP, what + ": unknown file kind in image");
    }
  }
  return out;
}

bool is_zombie(pid_t pid) {
  auto st = proc::read_stat_mm(pid);
  return st.ok() && st->state == 'Z';
}

void child_fail(int err_fd, const std::string& msg) {
  (void)!::write(err_fd, msg.data(), msg.size());
  ::_exit(127);
}

// Runs in the child: only this process's own state is touched, then it stops.
[[noreturn]] void child_main(const image::ImageMeta& meta, std::vector<PreparedFile>& files,
                             int err_fd) {
  if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0)
    child_fail(err_fd, "PTRACE_TRACEME failed");
  // glibc registered rseq for this thread; the kernel writes that area on
  // return to user space, which faults once the area is unmapped.
  if (__rseq_size > 0)
    ::syscall(SYS_rseq, static_cast<char*>(__builtin_thread_pointer()) + __rseq_offset,
              __rseq_size < 32 ? 32 : __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG);

  // Lift every source fd above all target numbers so the dup2s cannot collide.
  int top = err_fd;
  for (const auto& f : files) top = std::max({top, f.target, f.source});
  for (auto& f : files) {
    if (f.source < 0) continue;
    int high = ::fcntl(f.source, F_DUPFD_CLOEXEC, top + 1);
    if (high < 0) child_fail(err_fd, "fd shuffle failed: " + std::string(std::strerror(errno)));
    f.source = high;
    top = high;
  }
  std::vector<int> keep;
  for (const auto& f : files) {
    if (f.source >= 0 && ::dup2(f.source, f.target) < 0)
      child_fail(err_fd, "dup2 to fd " + std::to_string(f.target) + ": " + std::strerror(errno));
    ::fcntl(f.target, F_SETFD, f.fd_flags);
    keep.push_back(f.target);
  }
  // Close everything else (the err pipe goes when we stop: it is close-on-exec
  // in spirit, but there is no exec, so it is closed explicitly below).
  keep.push_back(err_fd);
  std::sort(keep.begin(), keep.end());
  unsigned lo = 0;
  for (int k : keep) {
    if (unsigned(k) > lo) ::syscall(SYS_close_range, lo, unsigned(k) - 1, 0);
    lo = unsigned(k) + 1;
  }
  ::syscall(SYS_close_range, lo, ~0u, 0);

  if (::chdir(meta.process.cwd.c_str()) != 0)
    child_fail(err_fd, "working directory " + meta.process.cwd + ": " + std::strerror(errno));
  ::umask(mode_t(meta.process.umask));
  ::prctl(PR_SET_NAME, meta.process.comm.c_str(), 0, 0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &dfl, nullptr);
  // The checkpointed dispositions, as raw kernel structs: glibc's sigaction()
  // would substitute its own restorer, an address of this program.
  for (const image::SignalAction& a : meta.process.sigactions) {
    uint64_t ksa[4] = {a.handler, a.flags, a.restorer, a.mask};
    if (::syscall(SYS_rt_sigaction, a.signo, ksa, nullptr, 8) != 0)
      child_fail(err_fd, "restoring the action of signal " + std::to_string(a.signo) + ": " +
                             std::strerror(errno));
  }
  uint64_t mask = meta.threads.empty() ? 0 : meta.threads[0].sigmask;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, nullptr, 8);

  ::close(err_fd);  // EOF tells the parent that setup succeeded
  // glibc's cached TID is the parent's after a raw clone3: signal by PID, not raise().
  ::syscall(SYS_kill, ::syscall(SYS_getpid), SIGSTOP);
  ::_exit(127);  // not reached: the tracer replaces this process's whole image
}

}  // namespace

Result<pid_t> spawn_stopped(const image::ImageMeta& meta, bool new_pid) {
  std::vector<UniqueFd> owned;
  CKPT_ASSIGN(std::vector<PreparedFile> files, prepare_files(meta, owned));

  int errp[2];
  if (::pipe2(errp, O_CLOEXEC) != 0) return sys_error("pipe");
  UniqueFd err_r(errp[0]), err_w(errp[1]);

  pid_t want = meta.process.pid;
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&want);
  args.set_tid_size = 1;
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  // A just-killed original may linger as a zombie until its parent reaps it.
  for (int tries = 0; pid < 0 && errno == EEXIST && tries < 100 && is_zombie(want); ++tries) {
    ::usleep(50 * 1000);
    pid = ::syscall(SYS_clone3, &args, sizeof args);
  }
  if (pid < 0 && errno == EEXIST) {
    if (!new_pid)
      return make_error(EEXIST, "PID " + std::to_string(want) +
                                    " is in use (use --new-pid to restore under another PID)");
    args.set_tid = 0;
    args.set_tid_size = 0;
    pid = ::syscall(SYS_clone3, &args, sizeof args);
  }
  if (pid < 0) {
    if (errno == EPERM)
      return make_error(EPERM, "creating a process with PID " + std::to_string(want) +
                                   " needs CAP_CHECKPOINT_RESTORE or root");
    return sys_error("clone3");
  }
  if (pid == 0) child_main(meta, files, err_w.get());

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
