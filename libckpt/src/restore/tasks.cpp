#include "restore/tasks.hpp"

#include <linux/filter.h>
#include <linux/prctl.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "proc/regs.hpp"
#include "proc/syscall_restart.hpp"
#include "restore/credentials.hpp"

namespace ckpt::restore {

namespace {

#ifndef PR_TIMER_CREATE_RESTORE_IDS
#define PR_TIMER_CREATE_RESTORE_IDS 77
#endif
constexpr uint64_t kAllBlocked = ~0ull;
constexpr uint64_t kNs = 1000000000;

Status set_sigmask(pid_t tid, uint64_t mask) {
  if (::ptrace(PTRACE_SETSIGMASK, tid, (void*)sizeof mask, &mask) != 0)
    return sys_error("setting the signal mask of thread " + std::to_string(tid));
  return {};
}

Status wait_new_thread(pid_t tid) {
  for (;;) {
    int st = 0;
    if (::waitpid(tid, &st, __WALL) < 0) {
      if (errno == EINTR) continue;
      return sys_error("waiting for new thread " + std::to_string(tid));
    }
    if (WIFSTOPPED(st)) return {};
    return make_error(ESRCH, "new thread " + std::to_string(tid) + " died");
  }
}

// A periodic timer caught between an expiry and the delivery of its signal
// reads as disarmed (the kernel re-arms it when the signal is dequeued, and
// the signal is among the queued ones restored): it runs on from one
// interval ahead.
uint64_t next_expiry(const image::TimerSetting& t) {
  return t.value_ns ? t.value_ns : t.interval_ns;
}

timespec to_timespec(uint64_t ns) {
  return {time_t(ns / kNs), long(ns % kNs)};
}
timeval to_timeval(uint64_t ns) {
  return {time_t(ns / kNs), suseconds_t(ns % kNs / 1000)};
}

// struct sigevent as the kernel reads it.
struct KernelSigevent {
  uint64_t value;
  int32_t signo;
  int32_t notify;
  int32_t tid;
  int32_t pad[11];
};
static_assert(sizeof(KernelSigevent) == 64);

}  // namespace

Result<proc::RemoteSyscall> TaskRestorer::remote(pid_t tid) {
  CKPT_ASSIGN(user_regs_struct base, proc::get_regs(tid));
  // A stack in the trampoline's last page: never inside a signal stack the
  // calls below may install (sigaltstack refuses to change the one in use).
  base.rsp = builder_.trampoline() + AddressSpaceBuilder::kTrampolineLen - 64;
  return proc::RemoteSyscall(tid, base, builder_.trampoline());
}

Result<long> TaskRestorer::sys(proc::RemoteSyscall& rs, const std::string& what, long nr,
                               uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4) {
  CKPT_ASSIGN(long r, rs.call(nr, a1, a2, a3, a4));
  if (proc::is_syscall_error(r)) return sys_error(what, int(-r));
  return r;
}

Status TaskRestorer::create_threads(proc::RemoteSyscall& leader) {
  if (meta_.threads.size() < 2) return {};
  const bool same_ids = pid_ == meta_.process.pid;
  for (size_t i = 1; i < meta_.threads.size(); ++i) {
    pid_t want = meta_.threads[i].tid;
    clone_args args{};
    args.flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM;
    CKPT_ASSIGN(uint64_t tid_addr, builder_.put_data(&want, sizeof want, sizeof args));
    if (same_ids) {
      args.set_tid = tid_addr;
      args.set_tid_size = 1;
    }
    CKPT_ASSIGN(uint64_t args_addr, builder_.put_data(&args, sizeof args));
    const std::string what = "creating thread " + std::to_string(want);
    CKPT_ASSIGN(long got, leader.call(SYS_clone3, args_addr, sizeof args));
    if (got == -EEXIST) return make_error(EEXIST, what + ": that TID is in use");
    if (got < 0) return sys_error(what, int(-got));
    if (same_ids && got != want) return make_error(EIO, what + ": got TID " + std::to_string(got));
    CKPT_TRY(wait_new_thread(pid_t(got)));
    tids_.push_back(pid_t(got));
    CKPT_TRY(set_sigmask(pid_t(got), kAllBlocked));
  }
  return {};
}

Status TaskRestorer::install_seccomp(proc::RemoteSyscall& rs, const image::SeccompFilter& f) {
  // Filters can exceed the data page: stage them in a mapping of their own.
  const uint64_t len = 4096 + f.instructions.size();
  CKPT_ASSIGN(long area, sys(rs, "mapping a seccomp staging area", SYS_mmap, 0, len,
                             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS));
  sock_fprog prog{uint16_t(f.instructions.size() / sizeof(sock_filter)),
                  reinterpret_cast<sock_filter*>(area + 4096)};
  Status st = proc::write_remote(rs.tid(), uint64_t(area), &prog, sizeof prog);
  if (st.ok())
    st = proc::write_remote(rs.tid(), uint64_t(area) + 4096, f.instructions.data(),
                            f.instructions.size());
  if (st.ok()) {
    auto r =
        sys(rs, "installing a seccomp filter", SYS_seccomp, SECCOMP_SET_MODE_FILTER,
            f.flags & (SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_SPEC_ALLOW), uint64_t(area));
    if (!r.ok()) st = r.error();
  }
  (void)rs.call(SYS_munmap, uint64_t(area), len);
  return st;
}

Status TaskRestorer::queue_signals(proc::RemoteSyscall& rs, const std::vector<image::SigInfo>& sigs,
                                   pid_t tid) {
  for (const image::SigInfo& si : sigs) {
    int32_t signo;
    std::memcpy(&signo, si.data(), 4);
    CKPT_ASSIGN(uint64_t at, builder_.put_data(si.data(), si.size()));
    const std::string what = "queueing signal " + std::to_string(signo);
    if (tid == 0) {
      CKPT_TRY(sys(rs, what, SYS_rt_sigqueueinfo, uint64_t(pid_), uint64_t(signo), at));
    } else {
      CKPT_TRY(
          sys(rs, what, SYS_rt_tgsigqueueinfo, uint64_t(pid_), uint64_t(tid), uint64_t(signo), at));
    }
  }
  return {};
}

Status TaskRestorer::thread_calls(proc::RemoteSyscall& rs, size_t i) {
  const image::ThreadRecord& t = meta_.threads[i];
  const std::string who = "thread " + std::to_string(t.tid);
  CallBatch calls = builder_.batch(rs);  // one round trip
  if (t.robust_list)
    calls.add("set_robust_list", who, SYS_set_robust_list, t.robust_list, t.robust_len);
  calls.add("set_tid_address", who, SYS_set_tid_address, t.clear_child_tid);
  if (!(t.altstack_flags & SS_DISABLE)) {
    stack_t ss{};
    ss.ss_sp = reinterpret_cast<void*>(t.altstack_sp);
    ss.ss_size = t.altstack_size;
    ss.ss_flags = int(t.altstack_flags & ~uint32_t(SS_ONSTACK));
    CKPT_ASSIGN(uint64_t at, builder_.put_data(&ss, sizeof ss));
    calls.add("sigaltstack", who, SYS_sigaltstack, at);
  }
  if (t.rseq_len)
    calls.add("registering rseq", who, SYS_rseq, t.rseq_ptr, t.rseq_len, 0, t.rseq_sig);
  CKPT_TRY(calls.run());
  CKPT_TRY(queue_signals(rs, t.pending, tids_[i]));
  // Last: seccomp is suspended for us (PTRACE_O_SUSPEND_SECCOMP) when we may,
  // but without that privilege the filters would judge the calls above.
  for (const image::SeccompFilter& f : t.seccomp) CKPT_TRY(install_seccomp(rs, f));
  return {};
}

Status TaskRestorer::restore_thread(size_t i) {
  const image::ThreadRecord& t = meta_.threads[i];
  CKPT_ASSIGN(proc::RemoteSyscall rs, remote(tids_[i]));
  CKPT_TRY(thread_calls(rs, i));
  CKPT_TRY(restore_identity(rs, builder_, meta_, i));  // drops our privileges: last
  CKPT_TRY(proc::set_xstate(tids_[i], t.xstate));
  user_regs_struct captured;
  std::memcpy(&captured, t.gpregs.data(), sizeof captured);
  return proc::set_regs(tids_[i], proc::resume_registers(captured));
}

Status TaskRestorer::posix_timers(proc::RemoteSyscall& rs) {
  const auto& timers = meta_.state.timers;
  if (timers.empty()) return {};
  // Since Linux 6.17 timer_create can be told the ID; before, IDs come in
  // order from 0, so holes are filled with placeholder timers deleted after.
  CKPT_ASSIGN(long by_id, rs.call(SYS_prctl, PR_TIMER_CREATE_RESTORE_IDS, 1));
  std::vector<int32_t> placeholders;
  std::vector<const image::PosixTimer*> sorted;
  for (const auto& t : timers) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->id < b->id; });
  for (const image::PosixTimer* t : sorted) {
    const std::string what = "recreating POSIX timer " + std::to_string(t->id);
    KernelSigevent ev{};
    ev.value = t->value;
    ev.signo = t->signo;
    ev.notify = t->notify;
    ev.tid = t->notify_tid;
    for (size_t i = 0; i < meta_.threads.size(); ++i)
      if (meta_.threads[i].tid == t->notify_tid) ev.tid = tids_[i];
    CKPT_ASSIGN(uint64_t ev_at, builder_.put_data(&ev, sizeof ev));
    for (;;) {
      int32_t id = t->id;
      CKPT_ASSIGN(uint64_t id_at, builder_.put_data(&id, sizeof id, sizeof ev));
      CKPT_TRY(sys(rs, what, SYS_timer_create, uint64_t(t->clock), ev_at, id_at));
      CKPT_TRY(proc::read_remote(pid_, id_at, &id, sizeof id));
      if (id == t->id) break;
      if (by_id == 0 || id > t->id)
        return make_error(EIO, what + ": the kernel gave ID " + std::to_string(id));
      placeholders.push_back(id);
    }
    if (t->setting.value_ns || t->setting.interval_ns) {
      itimerspec its{to_timespec(t->setting.interval_ns), to_timespec(next_expiry(t->setting))};
      CKPT_ASSIGN(uint64_t at, builder_.put_data(&its, sizeof its));
      CKPT_TRY(sys(rs, what, SYS_timer_settime, uint64_t(t->id), 0, at, 0));
    }
  }
  for (int32_t id : placeholders) CKPT_TRY(sys(rs, "timer_delete", SYS_timer_delete, uint64_t(id)));
  if (by_id == 0) (void)rs.call(SYS_prctl, PR_TIMER_CREATE_RESTORE_IDS, 0);
  return {};
}

Status TaskRestorer::process_calls(proc::RemoteSyscall& rs) {
  const image::ProcessState& ps = meta_.state;
  CallBatch first = builder_.batch(rs);
  first.add("personality", {}, SYS_personality, ps.personality);
  if (ps.no_new_privs) first.add("no_new_privs", {}, SYS_prctl, PR_SET_NO_NEW_PRIVS, 1);
  CKPT_TRY(first.run());
  CKPT_TRY(queue_signals(rs, ps.pending, 0));
  CKPT_TRY(posix_timers(rs));
  for (int which = 0; which < 3; ++which) {
    const image::TimerSetting& t = ps.itimers[which];
    if (!t.value_ns && !t.interval_ns) continue;
    itimerval itv{to_timeval(t.interval_ns), to_timeval(next_expiry(t))};
    if (itv.it_value.tv_sec == 0 && itv.it_value.tv_usec == 0) itv.it_value.tv_usec = 1;
    CKPT_ASSIGN(uint64_t at, builder_.put_data(&itv, sizeof itv));
    CKPT_TRY(sys(rs, "setitimer", SYS_setitimer, uint64_t(which), at, 0));
  }
  if (ps.has_rlimits) {
    for (int r = 0; r < 16; ++r) {
      rlimit64 rl{ps.rlimits[2 * r], ps.rlimits[2 * r + 1]};
      if (::prlimit64(pid_, __rlimit_resource(r), &rl, nullptr) != 0)
        return sys_error("setting resource limit " + std::to_string(r));
    }
  }
  // Credentials after every step that needs our privileges (prlimit on a
  // process of another user needs CAP_SYS_RESOURCE); a change of them clears
  // the parent-death signal and the dumpable flag, so those come after.
  CKPT_TRY(restore_identity(rs, builder_, meta_, 0));
  CallBatch last = builder_.batch(rs);
  last.add("PR_SET_PDEATHSIG", {}, SYS_prctl, PR_SET_PDEATHSIG, uint64_t(ps.pdeathsig));
  // Not dumpable makes /proc files root's: the last prctl, after our own reads.
  if (ps.dumpable != 1 || !meta_.credentials.empty())
    last.add("PR_SET_DUMPABLE", {}, SYS_prctl, PR_SET_DUMPABLE, uint64_t(ps.dumpable));
  return last.run();
}

Status TaskRestorer::restore_leader() {
  CKPT_TRY(set_sigmask(pid_, kAllBlocked));
  CKPT_ASSIGN(proc::RemoteSyscall rs, remote(pid_));
  CKPT_TRY(thread_calls(rs, 0));
  return process_calls(rs);
}

Status TaskRestorer::load_masks() {
  for (size_t i = 0; i < meta_.threads.size(); ++i)
    CKPT_TRY(set_sigmask(tids_[i], meta_.threads[i].sigmask));
  masks_loaded_ = true;
  return {};
}

Status TaskRestorer::release() {
  if (!masks_loaded_) CKPT_TRY(load_masks());
  // Non-leaders first: the leader is the one the caller waits for. Only
  // detaches here: a caller that announces the process before releasing it
  // (cr_recv) leaves as little as possible between the two.
  for (size_t i = meta_.threads.size(); i-- > 0;) {
    const image::ThreadRecord& t = meta_.threads[i];
    pid_t tid = tids_[i];
    if (::ptrace(PTRACE_DETACH, tid, nullptr, (void*)(long)t.pending_signal) != 0)
      return sys_error("releasing thread " + std::to_string(tid));
  }
  return {};
}

}  // namespace ckpt::restore
