#include "restore/credentials.hpp"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "proc/credentials.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::restore {

namespace {

#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

std::string who(pid_t tid) {
  return "thread " + std::to_string(tid) + ": ";
}

Result<image::TaskCredentials> current(pid_t tid) {
  image::TaskCredentials c;
  CKPT_ASSIGN(std::string status, read_file(proc_path(tid, "status")));
  CKPT_TRY(proc::parse_status_credentials(status, &c));
  return c;
}

bool same_ids(const image::TaskCredentials& a, const image::TaskCredentials& b) {
  return a.uid == b.uid && a.gid == b.gid && a.groups == b.groups &&
         a.cap_inheritable == b.cap_inheritable && a.cap_permitted == b.cap_permitted &&
         a.cap_effective == b.cap_effective && a.cap_bounding == b.cap_bounding &&
         a.cap_ambient == b.cap_ambient;
}

std::string caps_hex(uint64_t v) {
  return hex(v);
}

// What a mismatch after setting looks like, for the error message.
std::string differences(const image::TaskCredentials& want, const image::TaskCredentials& got) {
  auto ids = [](const std::array<uint32_t, 4>& a) {
    return std::to_string(a[0]) + "/" + std::to_string(a[1]) + "/" + std::to_string(a[2]) + "/" +
           std::to_string(a[3]);
  };
  std::string d;
  if (want.uid != got.uid) d += " uids " + ids(got.uid) + " instead of " + ids(want.uid);
  if (want.gid != got.gid) d += " gids " + ids(got.gid) + " instead of " + ids(want.gid);
  if (want.groups != got.groups) d += " supplementary groups differ";
  if (want.cap_permitted != got.cap_permitted)
    d += " permitted capabilities " + caps_hex(got.cap_permitted) + " instead of " +
         caps_hex(want.cap_permitted);
  if (want.cap_effective != got.cap_effective) d += " effective capabilities differ";
  if (want.cap_inheritable != got.cap_inheritable) d += " inheritable capabilities differ";
  if (want.cap_bounding != got.cap_bounding) d += " bounding sets differ";
  if (want.cap_ambient != got.cap_ambient) d += " ambient capabilities differ";
  return d;
}

// The capability sets the restorer may not hand out (its own permitted set
// bounds what its child can keep).
std::string missing_caps(uint64_t wanted, uint64_t have) {
  uint64_t miss = wanted & ~have;
  std::string s;
  for (int b = 0; b < 64; ++b)
    if (miss >> b & 1) s += (s.empty() ? "" : ",") + std::to_string(b);
  return s;
}

class Setter {
 public:
  Setter(proc::RemoteSyscall& rs, AddressSpaceBuilder& b) : rs_(rs), b_(b) {}

  Status call(const std::string& what, long nr, uint64_t a1 = 0, uint64_t a2 = 0, uint64_t a3 = 0,
              uint64_t a4 = 0) {
    CKPT_ASSIGN(long r, rs_.call(nr, a1, a2, a3, a4));
    if (proc::is_syscall_error(r)) return sys_error(who(rs_.tid()) + what, int(-r));
    return {};
  }
  Result<long> value(long nr, uint64_t a1 = 0, uint64_t a2 = 0) { return rs_.call(nr, a1, a2); }

  // capset(2) with version 3 (two 32-bit words per set).
  Status capset(uint64_t eff, uint64_t prm, uint64_t inh) {
    struct {
      __user_cap_header_struct h;
      __user_cap_data_struct d[2];
    } a{};
    a.h.version = _LINUX_CAPABILITY_VERSION_3;
    a.h.pid = 0;
    for (int i = 0; i < 2; ++i)
      a.d[i] = {uint32_t(eff >> (32 * i)), uint32_t(prm >> (32 * i)), uint32_t(inh >> (32 * i))};
    CKPT_ASSIGN(uint64_t at, b_.put_data(&a, sizeof a));
    return call("capset", SYS_capset, at, at + sizeof a.h);
  }

  Result<uint64_t> put(const void* p, size_t n) { return b_.put_data(p, n); }

 private:
  proc::RemoteSyscall& rs_;
  AddressSpaceBuilder& b_;
};

}  // namespace

Status restore_scheduling(pid_t tid, const image::TaskCredentials& c) {
  if (!c.affinity.empty()) {
    // Only CPUs this node has: a migration to a smaller node keeps what it can.
    std::vector<uint64_t> online(1024 / 8);
    long n = ::syscall(SYS_sched_getaffinity, 0, online.size() * 8, online.data());
    if (n < 0) return sys_error("sched_getaffinity");
    std::vector<uint64_t> mask(c.affinity);
    bool any = false;
    for (size_t i = 0; i < mask.size(); ++i) {
      mask[i] &= i < size_t(n) / 8 ? ~0ull : 0;
      any |= mask[i] != 0;
    }
    if (!any) return make_error(EINVAL, who(tid) + "its CPU affinity names no CPU of this node");
    if (::syscall(SYS_sched_setaffinity, tid, mask.size() * 8, mask.data()) != 0)
      return sys_error(who(tid) + "restoring its CPU affinity");
  }
  errno = 0;
  int nice = ::getpriority(PRIO_PROCESS, id_t(tid));
  if (!(nice == -1 && errno) && nice != c.nice &&
      ::setpriority(PRIO_PROCESS, id_t(tid), c.nice) != 0)
    return sys_error(who(tid) + "restoring nice " + std::to_string(c.nice));
  int policy = ::sched_getscheduler(tid);
  sched_param sp{};
  ::sched_getparam(tid, &sp);
  if (policy != c.sched_policy || sp.sched_priority != c.sched_priority) {
    sp.sched_priority = c.sched_priority;
    if (::sched_setscheduler(tid, c.sched_policy, &sp) != 0)
      return sys_error(who(tid) + "restoring scheduling policy " +
                       std::to_string(c.sched_policy & ~SCHED_RESET_ON_FORK) + " priority " +
                       std::to_string(c.sched_priority));
  }
  return {};
}

Status restore_credentials(proc::RemoteSyscall& rs, AddressSpaceBuilder& builder,
                           const image::TaskCredentials& c) {
  const pid_t tid = rs.tid();
  Setter set(rs, builder);
  CKPT_ASSIGN(image::TaskCredentials now, current(tid));
  CKPT_ASSIGN(long bits, set.value(SYS_prctl, PR_GET_SECUREBITS));
  if (bits < 0) return sys_error(who(tid) + "PR_GET_SECUREBITS", int(-bits));
  const uint32_t want_bits = c.securebits_known() ? c.securebits : uint32_t(bits);
  if (!same_ids(c, now) || want_bits != uint32_t(bits)) {
    // The restorer's permitted set bounds what the thread can keep.
    if (std::string miss = missing_caps(c.cap_permitted, now.cap_permitted); !miss.empty())
      return make_error(EPERM, who(tid) + "the checkpointed process had capabilities " + miss +
                                   " that the restorer does not have");
    // Each step runs only when its value differs: a restorer without
    // CAP_SETGID/CAP_SETUID/CAP_SETPCAP (a user's cr_restart holding only
    // CAP_CHECKPOINT_RESTORE) restores its own ids and drops the rest.
    // 1. Inheritable set first: it may hold bits the bounding set drops.
    if (now.cap_inheritable != c.cap_inheritable)
      CKPT_TRY(set.capset(now.cap_effective, now.cap_permitted, c.cap_inheritable));
    // 2. The bounding set (needs CAP_SETPCAP, still ours).
    for (int b = 0; b < 64; ++b)
      if ((now.cap_bounding >> b & 1) && !(c.cap_bounding >> b & 1))
        CKPT_TRY(set.call("dropping capability " + std::to_string(b) + " from the bounding set",
                          SYS_prctl, PR_CAPBSET_DROP, uint64_t(b)));
    // 3. Groups and gids.
    if (c.groups.size() * 4 > 2048)
      return make_error(E2BIG, who(tid) + std::to_string(c.groups.size()) +
                                   " supplementary groups: more than 512 are not supported");
    if (now.groups != c.groups) {
      CKPT_ASSIGN(uint64_t groups_at, set.put(c.groups.data(), c.groups.size() * 4));
      CKPT_TRY(set.call("setgroups", SYS_setgroups, c.groups.size(), groups_at));
    }
    if (now.gid != c.gid) {
      CKPT_TRY(set.call("setresgid", SYS_setresgid, c.gid[0], c.gid[1], c.gid[2]));
      (void)set.value(SYS_setfsgid, c.gid[3]);  // checked below
    }
    // 4. Uids with no capability fixup, so CAP_SETPCAP stays for step 6.
    uint64_t bits_now = uint64_t(bits);
    if (now.uid != c.uid) {
      if (!(bits_now & SECBIT_NO_SETUID_FIXUP)) {
        bits_now |= SECBIT_NO_SETUID_FIXUP;
        CKPT_TRY(set.call("securebits", SYS_prctl, PR_SET_SECUREBITS, bits_now));
      }
      CKPT_TRY(set.call("setresuid", SYS_setresuid, c.uid[0], c.uid[1], c.uid[2]));
      (void)set.value(SYS_setfsuid, c.uid[3]);
    }
    // 5. Ambient capabilities (need permitted and inheritable: both still allow).
    if (now.cap_ambient != c.cap_ambient) {
      CKPT_TRY(set.call("clearing ambient capabilities", SYS_prctl, PR_CAP_AMBIENT,
                        PR_CAP_AMBIENT_CLEAR_ALL));
      for (int b = 0; b < 64; ++b)
        if (c.cap_ambient >> b & 1)
          CKPT_TRY(set.call("raising ambient capability " + std::to_string(b), SYS_prctl,
                            PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, uint64_t(b)));
    }
    // 6. The saved securebits, locks included, then 7. the sets: only dropping now.
    if (bits_now != want_bits)
      CKPT_TRY(set.call("restoring securebits", SYS_prctl, PR_SET_SECUREBITS, want_bits));
    CKPT_TRY(set.capset(c.cap_effective, c.cap_permitted, c.cap_inheritable));
  }
  if (c.no_new_privs()) CKPT_TRY(set.call("no_new_privs", SYS_prctl, PR_SET_NO_NEW_PRIVS, 1));
  // Read everything back: setfs[ug]id report no error, and a kernel may refuse quietly.
  CKPT_ASSIGN(image::TaskCredentials got, current(tid));
  if (!same_ids(c, got))
    return make_error(EPERM, who(tid) + "credentials not restored:" + differences(c, got));
  CKPT_ASSIGN(bits, set.value(SYS_prctl, PR_GET_SECUREBITS));
  if (uint32_t(bits) != want_bits)
    return make_error(
        EPERM, who(tid) + "securebits " + hex(uint64_t(bits)) + " instead of " + hex(want_bits));
  return {};
}

Status check_credentials_unchanged(pid_t pid, const image::ImageMeta& meta) {
  for (const image::TaskCredentials& c : meta.credentials) {
    image::TaskCredentials now;
    CKPT_ASSIGN(std::string status,
                read_file(proc_path(pid, "task/") + std::to_string(c.tid) + "/status"));
    CKPT_TRY(proc::parse_status_credentials(status, &now));
    if (!same_ids(c, now))
      return make_error(ENOTSUP, who(c.tid) + "its credentials changed since the checkpoint (" +
                                     differences(c, now).substr(1) + "): not rolled back");
  }
  return {};
}

Status restore_identity(proc::RemoteSyscall& rs, AddressSpaceBuilder& builder,
                        const image::ImageMeta& meta, size_t index) {
  if (meta.credentials.empty()) return {};
  if (meta.credentials.size() != meta.threads.size() || index >= meta.credentials.size())
    return make_error(EINVAL, "the image has credentials for " +
                                  std::to_string(meta.credentials.size()) + " threads but " +
                                  std::to_string(meta.threads.size()) + " threads");
  const image::TaskCredentials& c = meta.credentials[index];
  if (c.tid != meta.threads[index].tid)
    return make_error(EINVAL, "the image's credentials of thread " + std::to_string(c.tid) +
                                  " are not in thread order");
  CKPT_TRY(restore_scheduling(rs.tid(), c));
  return restore_credentials(rs, builder, c);
}

}  // namespace ckpt::restore
