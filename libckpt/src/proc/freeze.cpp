#include "proc/freeze.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>

#include "proc/maps.hpp"
#include "proc/status.hpp"
#include "util/fd.hpp"

namespace ckpt::proc {

namespace {

constexpr unsigned long kPfKthread = 0x00200000;

// "PID N (name)" of the thread's tracer, "" if it has none.
std::string tracer_of(pid_t tid) {
  auto status = read_file("/proc/" + std::to_string(tid) + "/status");
  std::string tracer;
  if (!status.ok() || !status_field(*status, "TracerPid", &tracer)) return "";
  tracer.erase(0, tracer.find_first_not_of(" \t"));
  if (tracer.empty() || tracer == "0") return "";
  return "PID " + tracer + " (" + comm_of(pid_t(std::atoi(tracer.c_str()))) + ")";
}

}  // namespace

Status FrozenProcess::seize_thread(pid_t tid) {
  // Seccomp filters of the target must not see the calls we inject: suspend
  // them while we hold it (needs CAP_SYS_ADMIN; without it, try plainly).
  const long opts = PTRACE_O_TRACESYSGOOD;
  bool seized = ::ptrace(PTRACE_SEIZE, tid, nullptr, (void*)(opts | PTRACE_O_SUSPEND_SECCOMP)) == 0;
  if (!seized && (errno == EPERM || errno == EINVAL))
    seized = ::ptrace(PTRACE_SEIZE, tid, nullptr, (void*)opts) == 0;
  if (!seized) {
    if (errno == ESRCH) return make_error(ESRCH, "thread " + std::to_string(tid) + " vanished");
    if (errno == EPERM) {
      if (std::string tracer = tracer_of(tid); !tracer.empty())
        return make_error(EBUSY, "PID " + std::to_string(pid_) + " is traced by " + tracer +
                                     ": a process has one tracer at a time");
      return make_error(EPERM, "permission denied: cannot trace PID " + std::to_string(pid_) +
                                   " (need ptrace rights over it, and no other tracer)");
    }
    return sys_error("ptrace seize " + std::to_string(tid));
  }
  threads_.push_back(FrozenThread{tid});  // first, so release() detaches it whatever happens next
  auto stop = stop_seized_thread(tid);
  if (!stop.ok()) {
    if (stop.error().code == ESRCH) {
      threads_.pop_back();
      return make_error(ESRCH, "PID " + std::to_string(pid_) + " exited while being frozen");
    }
    return stop.error();
  }
  threads_.back().pending_signal = stop->pending_signal;
  threads_.back().group_stopped = stop->group_stopped;
  return {};
}

Result<SeizedStop> stop_seized_thread(pid_t tid) {
  if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0)
    return sys_error("ptrace interrupt " + std::to_string(tid));
  SeizedStop out;
  for (;;) {
    int st = 0;
    if (::waitpid(tid, &st, __WALL) < 0) {
      if (errno == EINTR) continue;
      return sys_error("waiting for " + std::to_string(tid) + " to stop");
    }
    if (WIFEXITED(st) || WIFSIGNALED(st))
      return make_error(ESRCH, "thread " + std::to_string(tid) + " exited while being stopped");
    if (!WIFSTOPPED(st)) continue;
    const int sig = WSTOPSIG(st);
    if ((st >> 16) == PTRACE_EVENT_STOP) {
      // SIGSTOP-like signals here mean a group stop was in effect.
      out.group_stopped = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
      return out;
    }
    // A signal-delivery stop came first: the thread was already stopping
    // for a signal when the interrupt came, so the interrupt's stop may
    // still be queued and would surprise the first call we inject. Keep the
    // signal (to re-deliver at the release), queue the interrupt again (now
    // certain to be pending: a stop clears it only when entered) and resume
    // with no signal: the thread traps at once, before any of its code runs.
    if (out.pending_signal != 0)
      return make_error(EAGAIN, "thread " + std::to_string(tid) + " stopped for signal " +
                                    std::to_string(sig) + " after signal " +
                                    std::to_string(out.pending_signal) + " while being stopped");
    out.pending_signal = sig;
    if (::ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0 ||
        ::ptrace(PTRACE_CONT, tid, nullptr, nullptr) != 0)
      return sys_error("stopping " + std::to_string(tid) + " after its signal stop");
  }
}

Result<std::unique_ptr<FrozenProcess>> FrozenProcess::freeze(pid_t pid) {
  if (pid <= 0) return make_error(EINVAL, "invalid PID " + std::to_string(pid));
  if (pid == ::getpid()) return make_error(EINVAL, "refusing to checkpoint myself");
  CKPT_ASSIGN(std::vector<pid_t> tids, task_ids(pid));
  auto st = read_stat_mm(pid);
  if (!st.ok()) return make_error(ESRCH, "no process with PID " + std::to_string(pid));
  if (st->flags & kPfKthread)
    return make_error(EINVAL, "PID " + std::to_string(pid) + " is a kernel thread");
  if (st->state == 'Z') return make_error(ESRCH, "PID " + std::to_string(pid) + " is a zombie");

  std::unique_ptr<FrozenProcess> fp(new FrozenProcess(pid));
  std::set<pid_t> seized;
  // Threads may be created while we seize: repeat until the task list is stable.
  for (int round = 0; round < 100; ++round) {
    bool added = false;
    for (pid_t tid : tids) {
      if (seized.count(tid)) continue;
      auto s = fp->seize_thread(tid);
      if (!s.ok()) {
        if (s.error().code == ESRCH && tid != pid) continue;  // a thread exited meanwhile
        return s.error();
      }
      seized.insert(tid);
      added = true;
    }
    if (!added) break;
    CKPT_ASSIGN(tids, task_ids(pid));
  }
  // Leader first, then by TID, so the order is stable.
  std::sort(fp->threads_.begin(), fp->threads_.end(), [&](auto& a, auto& b) {
    return (a.tid == pid) != (b.tid == pid) ? a.tid == pid : a.tid < b.tid;
  });
  return fp;
}

Status FrozenProcess::release() {
  if (released_) return {};
  released_ = true;
  Status result;
  for (const FrozenThread& t : threads_) {
    if (::ptrace(PTRACE_DETACH, t.tid, nullptr, (void*)(long)t.pending_signal) != 0 &&
        errno != ESRCH && result.ok())
      result = sys_error("ptrace detach " + std::to_string(t.tid));
  }
  return result;
}

Status FrozenProcess::kill() {
  if (released_) return {};
  if (::kill(pid_, SIGKILL) != 0 && errno != ESRCH) return sys_error("kill");
  released_ = true;
  // Reap the ptrace stops; the real parent reaps the process itself. The
  // leader last: its exit is reported only once every other thread is reaped.
  for (int pass = 0; pass < 2; ++pass)
    for (const FrozenThread& t : threads_) {
      if ((t.tid == pid_) != (pass == 1)) continue;
      int st;
      while (::waitpid(t.tid, &st, __WALL) > 0 && !WIFEXITED(st) && !WIFSIGNALED(st)) {
      }
    }
  return {};
}

Result<std::vector<pid_t>> task_ids(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    if (errno == ENOENT) return make_error(ESRCH, "no process with PID " + std::to_string(pid));
    return sys_error(path);
  }
  std::vector<pid_t> tids;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    tids.push_back(pid_t(std::atoi(e->d_name)));
  }
  ::closedir(d);
  return tids;
}

Status die_with_tracer(pid_t pid) {
  CKPT_ASSIGN(std::vector<pid_t> tids, task_ids(pid));
  return die_with_tracer(tids);
}

Status die_with_tracer(const std::vector<pid_t>& tids) {
  // The options seize_thread set, plus EXITKILL (PTRACE_SETOPTIONS replaces them all).
  const long opts = PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL;
  for (pid_t tid : tids) {
    if (::ptrace(PTRACE_SETOPTIONS, tid, nullptr, (void*)(opts | PTRACE_O_SUSPEND_SECCOMP)) == 0)
      continue;
    if ((errno == EPERM || errno == EINVAL) &&
        ::ptrace(PTRACE_SETOPTIONS, tid, nullptr, (void*)opts) == 0)
      continue;
    return sys_error("making thread " + std::to_string(tid) + " die with its tracer");
  }
  return {};
}

FrozenProcess::~FrozenProcess() {
  (void)release();
}

}  // namespace ckpt::proc
