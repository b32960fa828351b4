#include "migrate/sandbox.hpp"

#include <seccomp.h>

namespace ckpt::migrate {

Status apply_receiver_sandbox() {
  // Found by running the handler under strace -f through successful and
  // failing sessions (docs/migration.md lists what each group is for).
  static const char* const kAllowed[] = {
      // the connection and the channel to the restoring parent
      "read", "write", "readv", "writev", "recvfrom", "sendto", "recvmsg", "sendmsg", "poll",
      "ppoll", "close", "shutdown",
      // writing the received chain
      "openat", "mkdir", "mkdirat", "rename", "renameat", "renameat2", "unlink", "unlinkat",
      "rmdir", "lseek", "pwrite64", "pread64", "fstat", "newfstatat", "statx", "fcntl", "fsync",
      "fdatasync", "getdents64",
      // memory (malloc, the reader's mapping of pages.img)
      "brk", "mmap", "munmap", "mremap", "madvise", "mprotect",
      // the C library's own needs
      "futex", "getpid", "gettid", "uname", "getrandom", "clock_gettime", "gettimeofday",
      "rt_sigprocmask", "rt_sigreturn", "restart_syscall", "exit", "exit_group"};
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (!ctx) return make_error(ENOMEM, "seccomp_init failed");
  int rc = 0;
  for (const char* name : kAllowed) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) != 0) break;
  }
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) return sys_error("installing the seccomp allowlist", -rc);
  return {};
}

}  // namespace ckpt::migrate
