#include "cr_run/adopted.hpp"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "cr_run/state.hpp"
#include "proc/tree.hpp"

namespace cr_run {

namespace {

// SIGKILL to every descendant of `pid` (children first listed, then theirs).
void end_descendants(pid_t pid) {
  std::error_code ec;
  for (const auto& t :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(t.path() / "children");
    pid_t c;
    while (in >> c) {
      ::kill(c, SIGSTOP);  // no more forks meanwhile
      end_descendants(c);
      ::kill(c, SIGKILL);
    }
  }
}

}  // namespace

ckpt::Status Adopted::watch() {
  if (watching_) return {};
  if (::ptrace(PTRACE_SEIZE, root_, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACEEXIT)) != 0)
    return ckpt::sys_error("watching the adopted job's root " + std::to_string(root_));
  watching_ = true;
  return {};
}

bool Adopted::resume_from(int status) {
  if (!WIFSTOPPED(status)) {
    watching_ = false;  // it ended: the kernel let go of it
    return false;
  }
  const int event = status >> 16, sig = WSTOPSIG(status);
  if (event == PTRACE_EVENT_STOP) {
    // A group stop (SIGSTOP, SIGTSTP...) stays one; an interrupt of ours
    // (sig SIGTRAP) just continues.
    if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
      ::ptrace(PTRACE_LISTEN, root_, nullptr, nullptr);
    else
      ::ptrace(PTRACE_CONT, root_, nullptr, nullptr);
  } else if (event == PTRACE_EVENT_EXIT) {
    // The rest of the job goes with its root, as a child job's does (its
    // members are not cr_run's children here: they would be reparented to
    // someone else first, and their PIDs are needed for a restart).
    end_descendants(root_);
    ::ptrace(PTRACE_CONT, root_, nullptr, nullptr);
  } else if (event != 0) {
    ::ptrace(PTRACE_CONT, root_, nullptr, nullptr);
  } else {
    // A signal on its way to the root: delivered as if nobody traced it.
    ::ptrace(PTRACE_CONT, root_, nullptr, reinterpret_cast<void*>(long(sig)));
  }
  return true;
}

void Adopted::remember_members() {
  members_.clear();
  std::vector<pid_t> todo = ckpt::proc::children_of(root_);
  for (size_t i = 0; i < todo.size() && i < 100000; ++i) {
    if (const uint64_t t = start_time(todo[i])) members_.emplace_back(todo[i], t);
    for (pid_t c : ckpt::proc::children_of(todo[i])) todo.push_back(c);
  }
}

void Adopted::end_remembered() const {
  for (const auto& [pid, started] : members_)
    if (start_time(pid) == started) ::kill(pid, SIGKILL);
}

ckpt::Status Adopted::let_go() {
  if (!watching_) return {};
  watching_ = false;
  // Detaching needs the tracee in a ptrace stop: interrupt it, pass on
  // whatever stop comes first (a signal is handed back by the detach).
  if (::ptrace(PTRACE_INTERRUPT, root_, nullptr, nullptr) != 0)
    return errno == ESRCH ? ckpt::Status{} : ckpt::sys_error("interrupting the adopted root");
  for (;;) {
    int st = 0;
    if (::waitpid(root_, &st, __WALL) < 0) {
      if (errno == EINTR) continue;
      return ckpt::sys_error("waiting for the adopted root");
    }
    if (!WIFSTOPPED(st)) return {};  // it ended meanwhile
    const int event = st >> 16, sig = WSTOPSIG(st);
    const long pass = (event == 0) ? sig : 0;
    if (::ptrace(PTRACE_DETACH, root_, nullptr, reinterpret_cast<void*>(pass)) == 0 ||
        errno == ESRCH)
      return {};
    return ckpt::sys_error("letting go of the adopted root");
  }
}

}  // namespace cr_run
