// Stops every thread of a process with PTRACE_SEIZE + PTRACE_INTERRUPT, without
// the process's cooperation, and lets it go again. The destructor releases a
// process that is still held, so every error path unwinds to a running target.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <memory>
#include <vector>

namespace ckpt::proc {

struct FrozenThread {
  pid_t tid = 0;
  int pending_signal = 0;      // a signal dequeued at the stop: re-delivered at release
  bool group_stopped = false;  // the process was already stopped (SIGSTOP) before we came
};

class FrozenProcess {
 public:
  // Fails with ESRCH (no such process), EPERM (may not trace) or the cause.
  static Result<std::unique_ptr<FrozenProcess>> freeze(pid_t pid);
  ~FrozenProcess();
  FrozenProcess(const FrozenProcess&) = delete;
  FrozenProcess& operator=(const FrozenProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::vector<FrozenThread>& threads() const { return threads_; }

  // Detaches from every thread; the process continues where it was.
  Status release();
  // Kills the process (SIGKILL) and reaps the ptrace link.
  Status kill();

 private:
  explicit FrozenProcess(pid_t pid) : pid_(pid) {}
  Status seize_thread(pid_t tid);

  pid_t pid_;
  std::vector<FrozenThread> threads_;
  bool released_ = false;
};

// From now on every thread of `pid` (held by us through FrozenProcess) dies
// if the calling process dies (PTRACE_O_EXITKILL): set at a tool's point of
// no return, after which releasing the process would let it run in a state
// that is neither the old one nor the new one (cr_pause midway), or run it
// twice (cr_migrate once the destination was told to start it). A detach
// (release) clears it again.
Status die_with_tracer(pid_t pid);
// The same for threads listed beforehand (task_ids of a frozen process): only
// the PTRACE_SETOPTIONS calls remain, for a caller that must do this right
// after a message it cannot take back.
Status die_with_tracer(const std::vector<pid_t>& tids);

// How a thread seized by us (PTRACE_SEIZE) came to its interrupt stop.
struct SeizedStop {
  int pending_signal = 0;  // dequeued at a signal-delivery stop on the way: not delivered
  bool group_stopped = false;
};
// Interrupts a seized thread and waits until it is in the interrupt's stop
// (PTRACE_EVENT_STOP) with no further stop queued, so that the next resume
// runs what the tracer set up. A signal it was stopping for meanwhile is
// taken out and returned. ESRCH: the thread died.
Result<SeizedStop> stop_seized_thread(pid_t tid);

// The thread IDs of `pid` (/proc/PID/task).
Result<std::vector<pid_t>> task_ids(pid_t pid);

}  // namespace ckpt::proc
