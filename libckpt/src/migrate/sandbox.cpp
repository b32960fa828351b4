#include "migrate/sandbox.hpp"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>

#include "migrate/landlock.hpp"

namespace ckpt::migrate {

namespace {

// `clear_pdeathsig`: also prctl(PR_SET_PDEATHSIG, 0), and no other prctl.
Status load_allowlist(std::initializer_list<const char*> allowed, bool clear_pdeathsig = false) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (!ctx) return make_error(ENOMEM, "seccomp_init failed");
  int rc = 0;
  for (const char* name : allowed) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) != 0) break;
  }
  if (rc == 0 && clear_pdeathsig)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 2,
                          SCMP_A0(SCMP_CMP_EQ, PR_SET_PDEATHSIG), SCMP_A1(SCMP_CMP_EQ, 0));
  if (rc == 0) rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) return sys_error("installing the seccomp allowlist", -rc);
  return {};
}

// Root without capabilities: the handlers stay uid 0, so the staging
// directory (root's, mode 0700) and the files they create stay root's and a
// root restore trusts them (docs/security.md, rule 2), but a kernel bug
// reached through them no longer comes with CAP_SYS_ADMIN, CAP_DAC_OVERRIDE
// and the rest. The securebits stop uid 0 from meaning "all capabilities"
// again (there is no execve under the allowlist either; this is the second
// lock). A non-root cr_recv has nothing to drop: EPERM there is fine.
Status drop_capabilities() {
  constexpr unsigned long kLockedBits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
                                        SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
                                        SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |
                                        SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
  if (::prctl(PR_SET_SECUREBITS, kLockedBits) != 0 && errno != EPERM)
    return sys_error("setting securebits");
  for (int cap = 0; ::prctl(PR_CAPBSET_READ, cap) >= 0; ++cap)
    if (::prctl(PR_CAPBSET_DROP, cap) != 0 && errno != EPERM)
      return sys_error("dropping capability " + std::to_string(cap) + " from the bounding set");
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return sys_error("clearing ambient capabilities");
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &h, none) != 0) return sys_error("dropping capabilities");
  return {};
}

}  // namespace

Status apply_receiver_sandbox(const std::string& staging) {
  // Landlock first: its own system calls are not in the allowlist.
  CKPT_TRY(landlock_confine(staging));
  CKPT_TRY(drop_capabilities());
  // Found by running the handler under strace -f through successful and
  // failing sessions (docs/migration.md lists what each group is for).
  return load_allowlist(
      {// the connection (frames in and out) and the channel to the parent
       "read", "write", "recvfrom", "sendto", "recvmsg", "sendmsg", "close",
       // content from the socket into pages.img through a pipe
       "pipe2", "splice", "fcntl",
       // writing the received generations into the staging directory and
       // opening them again (SnapshotReader): mkdir, files, rename into place
       "openat", "mkdir", "rename", "lseek", "writev", "pwrite64", "pwritev", "ftruncate",
       "pread64", "fstat", "newfstatat",
       // memory: malloc, the receive buffer, the reader's mapping of pages.img
       "brk", "mmap", "munmap", "mremap", "madvise",
       // the C library: locks, clocks without a vdso, signals, exit
       "futex", "getrandom", "clock_gettime", "rt_sigreturn", "restart_syscall", "exit",
       "exit_group",
       // the handover: the leader's status passed by the monitor, re-read
       // until its dying tracer let it go (migrate/handover)
       "poll", "ppoll"},
      /*clear_pdeathsig=*/true);
}

Status apply_gate_sandbox() {
  CKPT_TRY(landlock_confine(""));
  CKPT_TRY(drop_capabilities());
  return load_allowlist({// the connection, with a deadline, and the report to the parent
                         "read", "write", "recvfrom", "sendto", "recvmsg", "sendmsg", "poll",
                         "ppoll", "close",
                         // the nonce, the deadline, malloc, exit
                         "getrandom", "clock_gettime", "brk", "mmap", "munmap", "futex",
                         "rt_sigreturn", "restart_syscall", "exit", "exit_group"});
}

}  // namespace ckpt::migrate
