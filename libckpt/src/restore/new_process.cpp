#include "restore/new_process.hpp"

#include <linux/sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proc/maps.hpp"

namespace ckpt::restore {

namespace {

bool is_zombie(pid_t pid) {
  auto st = proc::read_stat_mm(pid);
  return st.ok() && st->state == 'Z';
}

}  // namespace

long clone_with_pid(pid_t want, bool new_pid) {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&want);
  args.set_tid_size = 1;
  long pid = -1;
  int err = 0;
  for (int tries = 0; tries < 100; ++tries) {
    pid = ::syscall(SYS_clone3, &args, sizeof args);
    err = errno;
    // A just-killed original may linger as a zombie until its parent reaps
    // it: retry while the holder is a zombie (or just gone).
    if (pid >= 0 || err != EEXIST || (!is_zombie(want) && ::kill(want, 0) == 0)) break;
    ::usleep(50 * 1000);
  }
  // EPERM: choosing a PID needs CAP_CHECKPOINT_RESTORE; any PID will do.
  if (pid < 0 && (err == EEXIST || err == EPERM) && new_pid) {
    args.set_tid = 0;
    args.set_tid_size = 0;
    pid = ::syscall(SYS_clone3, &args, sizeof args);
    err = errno;
  }
  errno = err;
  return pid;
}

void unregister_rseq() {
  if (__rseq_size > 0)
    ::syscall(SYS_rseq, static_cast<char*>(__builtin_thread_pointer()) + __rseq_offset,
              __rseq_size < 32 ? 32 : __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
}

bool set_process_basics(const image::ImageMeta& meta, std::string* err) {
  if (::chdir(meta.process.cwd.c_str()) != 0) {
    *err = "working directory " + meta.process.cwd + ": " + std::strerror(errno);
    return false;
  }
  ::umask(mode_t(meta.process.umask));
  ::prctl(PR_SET_NAME, meta.process.comm.c_str(), 0, 0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &dfl, nullptr);
  // Raw kernel structs: glibc's sigaction() would substitute its own
  // restorer, an address of this program.
  for (const image::SignalAction& a : meta.process.sigactions) {
    uint64_t ksa[4] = {a.handler, a.flags, a.restorer, a.mask};
    if (::syscall(SYS_rt_sigaction, a.signo, ksa, nullptr, 8) != 0) {
      *err =
          "restoring the action of signal " + std::to_string(a.signo) + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

}  // namespace ckpt::restore
