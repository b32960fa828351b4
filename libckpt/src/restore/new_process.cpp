#include "restore/new_process.hpp"

#include <linux/sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <string>

namespace ckpt::restore {

namespace {

// Whether the process holding `pid` is on its way out: a zombie, or still
// exiting (a SIGKILLed process frees its memory before it becomes a zombie,
// which takes a while for a large one). A thread of a killed process counts
// the same way.
bool is_going(pid_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "re");
  if (!f) return true;  // gone meanwhile
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  char state = 0;
  unsigned long flags = 0;
  // After "(comm)": state ppid pgrp session tty_nr tpgid flags.
  if (!p || std::sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2) return false;
  constexpr unsigned long kPfExiting = 0x4;
  return state == 'Z' || state == 'X' || (flags & kPfExiting);
}

}  // namespace

long clone_with_pid(pid_t want, bool new_pid) {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&want);
  args.set_tid_size = 1;
  long pid = -1;
  int err = 0;
  // A just-killed original may still be exiting, or linger as a zombie
  // until its parent reaps it: retry while the holder is going (10 s at
  // most), fail at once for a live one.
  for (int tries = 0; tries < 200; ++tries) {
    pid = ::syscall(SYS_clone3, &args, sizeof args);
    err = errno;
    if (pid >= 0 || err != EEXIST || !is_going(want)) break;
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

namespace {

// A working directory that had been removed: a new directory, entered and
// removed again, beside where the old one was (or in /tmp where that is
// gone too). The program sees what it saw: a directory with no links,
// getcwd() failing with ENOENT, nothing to be made in it.
bool enter_removed_directory(const std::string& was, std::string* err) {
  std::string parent = was.substr(0, was.size() - std::strlen(" (deleted)"));
  parent = parent.substr(0, std::max<size_t>(parent.rfind('/'), 1));
  struct stat st;
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) parent = "/tmp";
  std::string dir = (parent == "/" ? "" : parent) + "/.ckpt-cwd-XXXXXX";
  if (!::mkdtemp(dir.data()) || ::chdir(dir.c_str()) != 0 || ::rmdir(dir.c_str()) != 0) {
    *err = "working directory " + was + ": making a removed one in " + parent + ": " +
           std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

bool set_process_basics(const image::ImageMeta& meta, std::string* err) {
  if (meta.process.cwd.ends_with(" (deleted)")) {
    if (!enter_removed_directory(meta.process.cwd, err)) return false;
  } else if (::chdir(meta.process.cwd.c_str()) != 0) {
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
