#include "migrate/sandbox.hpp"

#include <seccomp.h>

#include <initializer_list>

#include "migrate/landlock.hpp"

namespace ckpt::migrate {

namespace {

Status load_allowlist(std::initializer_list<const char*> allowed) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (!ctx) return make_error(ENOMEM, "seccomp_init failed");
  int rc = 0;
  for (const char* name : allowed) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) != 0) break;
  }
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) return sys_error("installing the seccomp allowlist", -rc);
  return {};
}

}  // namespace

Status apply_receiver_sandbox(const std::string& staging) {
  // Landlock first: its own system calls are not in the allowlist.
  CKPT_TRY(landlock_confine(staging));
  // Found by running the handler under strace -f through successful and
  // failing sessions (docs/migration.md lists what each group is for).
  return load_allowlist({// the connection (frames in and out) and the channel to the parent
                         "read", "write", "recvfrom", "sendto", "recvmsg", "sendmsg", "close",
                         // content from the socket into pages.img through a pipe
                         "pipe2", "splice", "fcntl",
                         // writing the received generations into the staging directory and
                         // opening them again (SnapshotReader): mkdir, files, rename into place
                         "openat", "mkdir", "rename", "lseek", "writev", "pwrite64", "pwritev",
                         "ftruncate", "pread64", "fstat", "newfstatat",
                         // memory: malloc, the receive buffer, the reader's mapping of pages.img
                         "brk", "mmap", "munmap", "mremap", "madvise",
                         // the C library: locks, clocks without a vdso, signals, exit
                         "futex", "getrandom", "clock_gettime", "rt_sigreturn", "restart_syscall",
                         "exit", "exit_group"});
}

Status apply_gate_sandbox() {
  CKPT_TRY(landlock_confine(""));
  return load_allowlist({// the connection, with a deadline, and the report to the parent
                         "read", "write", "recvfrom", "sendto", "recvmsg", "sendmsg", "poll",
                         "ppoll", "close",
                         // the nonce, the deadline, malloc, exit
                         "getrandom", "clock_gettime", "brk", "mmap", "munmap", "futex",
                         "rt_sigreturn", "restart_syscall", "exit", "exit_group"});
}

}  // namespace ckpt::migrate
