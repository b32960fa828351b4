#include "proc/task_state.hpp"

#include <linux/filter.h>
#include <linux/prctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <sstream>
#include <string>

#include "proc/credentials.hpp"
#include "proc/inject.hpp"
#include "proc/signals.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::proc {

namespace {

#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif
#ifndef PTRACE_GET_SECCOMP_METADATA
#define PTRACE_GET_SECCOMP_METADATA 0x420d
#endif
#ifndef PTRACE_PEEKSIGINFO
#define PTRACE_PEEKSIGINFO 0x4209
#endif
constexpr uint32_t kPeekShared = 1;  // PTRACE_PEEKSIGINFO_SHARED

struct PeekArgs {  // struct ptrace_peeksiginfo_args
  uint64_t off;
  uint32_t flags;
  int32_t nr;
};

struct SeccompMetadata {  // struct seccomp_metadata
  uint64_t filter_off;
  uint64_t flags;
};

// A "Key:\tvalue" line of /proc/.../status as a number (`base` 10 or 16).
long status_field(const std::string& status, const char* key, int base = 10) {
  size_t at = status.find(std::string("\n") + key + ":");
  if (at == std::string::npos) return -1;
  return std::strtol(status.c_str() + at + std::strlen(key) + 2, nullptr, base);
}

Result<std::vector<image::SigInfo>> peek_signals(pid_t tid, bool shared) {
  std::vector<image::SigInfo> out;
  for (;;) {
    image::SigInfo batch[32];
    PeekArgs args{out.size(), shared ? kPeekShared : 0, 32};
    long n = ::ptrace(__ptrace_request(PTRACE_PEEKSIGINFO), tid, &args, batch);
    if (n < 0) return sys_error("reading the queued signals of " + std::to_string(tid));
    out.insert(out.end(), batch, batch + n);
    if (n < 32) return out;
  }
}

Result<std::vector<image::SeccompFilter>> read_seccomp(pid_t tid) {
  std::vector<image::SeccompFilter> newest_first;
  for (unsigned long i = 0;; ++i) {
    long n = ::ptrace(__ptrace_request(PTRACE_SECCOMP_GET_FILTER), tid, (void*)i, nullptr);
    if (n < 0 && errno == ENOENT) break;
    if (n < 0)
      return sys_error("thread " + std::to_string(tid) + ": reading its seccomp filter " +
                       std::to_string(i) + " (needs CAP_SYS_ADMIN)");
    image::SeccompFilter f;
    f.instructions.resize(size_t(n) * sizeof(sock_filter));
    if (::ptrace(__ptrace_request(PTRACE_SECCOMP_GET_FILTER), tid, (void*)i,
                 f.instructions.data()) != n)
      return sys_error("reading seccomp filter " + std::to_string(i));
    SeccompMetadata md{i, 0};
    if (::ptrace(__ptrace_request(PTRACE_GET_SECCOMP_METADATA), tid, (void*)sizeof md, &md) < 0)
      return sys_error("reading seccomp filter flags");
    f.flags = md.flags;
    newest_first.push_back(std::move(f));
  }
  std::reverse(newest_first.begin(), newest_first.end());
  return newest_first;
}

uint64_t timespec_ns(const timespec& t) {
  return uint64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}
uint64_t timeval_ns(const timeval& t) {
  return uint64_t(t.tv_sec) * 1000000000 + t.tv_usec * 1000;
}

// /proc/PID/timers: blocks of "ID:", "signal: SIG/VALUE", "notify: KIND/pid|tid.N", "ClockID:".
Result<std::vector<image::PosixTimer>> parse_timers(const std::string& text) {
  std::vector<image::PosixTimer> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ID:", 0) == 0) {
      out.emplace_back();
      out.back().id = std::atoi(line.c_str() + 3);
    } else if (out.empty()) {
      continue;
    } else if (line.rfind("signal:", 0) == 0) {
      char* end;
      out.back().signo = int32_t(std::strtol(line.c_str() + 7, &end, 10));
      if (*end == '/') out.back().value = std::strtoull(end + 1, nullptr, 16);
    } else if (line.rfind("notify:", 0) == 0) {
      std::string v = line.substr(7);
      v.erase(0, v.find_first_not_of(" \t"));
      image::PosixTimer& t = out.back();
      if (v.rfind("thread", 0) == 0) {
        t.notify = SIGEV_THREAD_ID;
      } else if (v.rfind("signal", 0) == 0) {
        t.notify = SIGEV_SIGNAL;
      } else if (v.rfind("none", 0) == 0) {
        t.notify = SIGEV_NONE;
      } else {
        return make_error(ENOTSUP, "POSIX timer " + std::to_string(t.id) + ": notification \"" + v +
                                       "\" not supported");
      }
      size_t dot = v.find('.');
      if (dot != std::string::npos) t.notify_tid = std::atoi(v.c_str() + dot + 1);
    } else if (line.rfind("ClockID:", 0) == 0) {
      out.back().clock = std::atoi(line.c_str() + 8);
    }
  }
  return out;
}

}  // namespace

Status parse_limits(const std::string& text, std::array<uint64_t, 32>* out) {
  // A header line, then one line per limit in RLIMIT order: a name padded
  // to 25 columns, then soft and hard in 20 columns each ("unlimited" or a
  // number in the limit's own unit, as getrlimit gives it).
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  for (int r = 0; r < 16; ++r) {
    if (!std::getline(in, line) || line.size() < 47)
      return make_error(EIO, "/proc limits: expected 16 limits, found " + std::to_string(r));
    for (int k = 0; k < 2; ++k) {
      std::string v = line.substr(size_t(26 + 21 * k), 20);
      v.erase(v.find_last_not_of(' ') + 1);
      char* end;
      uint64_t n = v == "unlimited" ? RLIM64_INFINITY : std::strtoull(v.c_str(), &end, 10);
      if (v != "unlimited" && (v.empty() || *end != 0))
        return make_error(EIO, "/proc limits: cannot read \"" + line + "\"");
      (*out)[size_t(2 * r + k)] = n;
    }
  }
  return {};
}

namespace {

// What needs no injected call: seccomp filters, robust list, queued signals.
Status read_thread_direct(pid_t pid, image::ThreadRecord* t) {
  const pid_t tid = t->tid;
  const std::string who = "thread " + std::to_string(tid);
  CKPT_ASSIGN(std::string status,
              read_file(proc_path(pid, "task/") + std::to_string(tid) + "/status"));
  long mode = status_field(status, "Seccomp");
  if (mode == 1) return make_error(ENOTSUP, who + ": strict seccomp mode: not supported");
  if (mode == 2) {
    CKPT_ASSIGN(t->seccomp, read_seccomp(tid));
  }
  long head_len = 0;
  void* head = nullptr;
  if (::syscall(SYS_get_robust_list, tid, &head, &head_len) != 0)
    return sys_error(who + ": get_robust_list");
  t->robust_list = reinterpret_cast<uint64_t>(head);
  t->robust_len = uint64_t(head_len);
  CKPT_ASSIGN(t->pending, peek_signals(tid, false));
  return {};
}

// The alternate stack and the TID address, answered into `scratch`.
Status read_thread_injected(RemoteSyscall& rs, uint64_t scratch, image::ThreadRecord* t,
                            image::TaskCredentials* creds) {
  const pid_t tid = t->tid;
  const std::string who = "thread " + std::to_string(tid);
  CKPT_ASSIGN(long r, rs.call_to_exit(SYS_sigaltstack, 0, scratch));
  if (r != 0) return sys_error(who + ": sigaltstack", int(-r));
  stack_t ss;
  CKPT_TRY(read_remote(tid, scratch, &ss, sizeof ss));
  t->altstack_sp = reinterpret_cast<uint64_t>(ss.ss_sp);
  t->altstack_size = ss.ss_size;
  t->altstack_flags = uint32_t(ss.ss_flags);
  if (creds) {  // no /proc interface: docs/security.md
    CKPT_ASSIGN(r, rs.call_to_exit(SYS_prctl, PR_GET_SECUREBITS));
    if (r < 0) return sys_error(who + ": PR_GET_SECUREBITS", int(-r));
    creds->securebits = uint32_t(r);
    creds->flags |= image::kCredSecurebitsKnown;
  }
  CKPT_ASSIGN(r, rs.call_to_exit(SYS_prctl, PR_GET_TID_ADDRESS, scratch));
  if (r != 0) return sys_error(who + ": PR_GET_TID_ADDRESS", int(-r));
  return read_remote(tid, scratch, &t->clear_child_tid, 8);
}

Status read_process_direct(pid_t pid, image::ProcessState* out) {
  // /proc/PID/limits needs only ptrace read access; prlimit() on another
  // user's process needs CAP_SYS_RESOURCE, which root lacks in many containers.
  CKPT_ASSIGN(std::string limits, read_file(proc_path(pid, "limits")));
  CKPT_TRY(parse_limits(limits, &out->rlimits));
  out->has_rlimits = true;
  CKPT_ASSIGN(std::string pers, read_file(proc_path(pid, "personality")));
  out->personality = uint32_t(std::strtoul(pers.c_str(), nullptr, 16));
  CKPT_ASSIGN(std::string status, read_file(proc_path(pid, "status")));
  out->no_new_privs = status_field(status, "NoNewPrivs") == 1;
  CKPT_ASSIGN(out->pending, peek_signals(pid, true));
  auto timers_text = read_file(proc_path(pid, "timers"));
  if (timers_text.ok()) {
    CKPT_ASSIGN(out->timers, parse_timers(*timers_text));
  }
  return {};
}

// Dumpable, parent-death signal, interval timers, POSIX timer settings.
Status read_process_injected(RemoteSyscall& rs, uint64_t scratch, image::ProcessState* out) {
  const pid_t pid = rs.tid();
  CKPT_ASSIGN(long r, rs.call_to_exit(SYS_prctl, PR_GET_DUMPABLE));
  if (r < 0) return sys_error("PR_GET_DUMPABLE", int(-r));
  out->dumpable = int32_t(r);
  CKPT_ASSIGN(r, rs.call_to_exit(SYS_prctl, PR_GET_PDEATHSIG, scratch));
  if (r != 0) return sys_error("PR_GET_PDEATHSIG", int(-r));
  CKPT_TRY(read_remote(pid, scratch, &out->pdeathsig, 4));
  for (int which = 0; which < 3; ++which) {
    CKPT_ASSIGN(r, rs.call_to_exit(SYS_getitimer, uint64_t(which), scratch));
    if (r != 0) return sys_error("getitimer", int(-r));
    itimerval it;
    CKPT_TRY(read_remote(pid, scratch, &it, sizeof it));
    out->itimers[which] = {timeval_ns(it.it_interval), timeval_ns(it.it_value)};
  }
  for (image::PosixTimer& t : out->timers) {
    CKPT_ASSIGN(r, rs.call_to_exit(SYS_timer_gettime, uint64_t(t.id), scratch));
    if (r != 0) return sys_error("timer_gettime " + std::to_string(t.id), int(-r));
    itimerspec its;
    CKPT_TRY(read_remote(pid, scratch, &its, sizeof its));
    t.setting = {timespec_ns(its.it_interval), timespec_ns(its.it_value)};
  }
  return {};
}

// Injected calls have a window: a tool killed during one leaves the thread
// with the call's registers. A single-threaded process whose signals all
// keep their default action is not touched at all: its alternate stack would
// never be used, no thread waits on its TID address, and a timer signal or
// a parent-death signal would end it by default (so a program relying on
// one has a handler, blocks or ignores it). Its dumpable flag is taken as
// the default (1); docs/state.md says so. Any other process gets every
// read: skipping values one by one (an alternate stack set before its
// handler, an alarm() watchdog at SIGALRM's default, the main thread's TID
// address joined after pthread_exit) would lose state some program relies on.
bool needs_injected_reads(pid_t pid, const std::vector<image::ThreadRecord>& threads,
                          const image::ProcessState& state,
                          const std::vector<image::TaskCredentials>* creds) {
  if (threads.size() != 1 || !state.timers.empty()) return true;
  if (creds && credentials_need_securebits(*creds)) return true;
  auto masks = read_signal_masks(pid, pid);
  if (!masks.ok()) return true;
  return (masks->caught | masks->ignored | masks->blocked) != 0;
}

}  // namespace

Status read_task_states(pid_t pid, std::vector<image::ThreadRecord>* threads,
                        image::ProcessState* state, std::vector<image::TaskCredentials>* creds,
                        uint64_t caught, std::vector<image::SignalAction>* handlers) {
  if (creds && creds->size() != threads->size()) creds = nullptr;
  if (!handlers) caught = 0;
  for (image::ThreadRecord& t : *threads) CKPT_TRY(read_thread_direct(pid, &t));
  CKPT_TRY(read_process_direct(pid, state));
  if (!caught && !needs_injected_reads(pid, *threads, *state, creds)) return {};
  // One instruction and one scratch page (the mm is shared) for all threads:
  // the freeze time grows by a few calls per thread, not a session each.
  CKPT_ASSIGN(InjectSite site, find_inject_site(pid));
  return with_injected_calls(pid, site, [&](RemoteSyscall& leader) -> Status {
    // Answers go below each thread's own call stack pointer (its return
    // frame's scratch); a page is mapped only for a thread without one.
    long page = 0;
    auto scratch_for = [&](RemoteSyscall& rs) -> Result<uint64_t> {
      if (rs.stack_scratch()) return rs.stack_scratch();
      if (!page) {
        CKPT_ASSIGN(long p, leader.call_to_exit(SYS_mmap, 0, kScratchSize, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS));
        if (is_syscall_error(p)) return sys_error("mmap in the target", int(-p));
        page = p;
      }
      return uint64_t(page);
    };
    Status st = [&]() -> Status {
      CKPT_ASSIGN(uint64_t scratch, scratch_for(leader));
      CKPT_TRY(read_handlers(leader, scratch, caught, handlers));
      CKPT_TRY(read_process_injected(leader, scratch, state));
      for (size_t i = 0; i < threads->size(); ++i) {
        image::ThreadRecord& t = (*threads)[i];
        image::TaskCredentials* c = creds ? &(*creds)[i] : nullptr;
        if (t.tid == pid) {
          CKPT_TRY(read_thread_injected(leader, scratch, &t, c));
          continue;
        }
        CKPT_TRY(with_injected_calls(t.tid, site, [&](RemoteSyscall& rs) -> Status {
          CKPT_ASSIGN(uint64_t mine, scratch_for(rs));
          return read_thread_injected(rs, mine, &t, c);
        }));
      }
      return {};
    }();
    if (page) (void)leader.call_to_exit(SYS_munmap, uint64_t(page), kScratchSize);
    return st;
  });
}

}  // namespace ckpt::proc
