// A thread that takes a signal while it is being frozen stops in a
// signal-delivery stop before the interrupt's stop. The freeze must leave
// it with nothing more queued: the first call injected afterwards stops at
// its own syscall stops, not at a left-over PTRACE_EVENT_STOP, and the
// signal is delivered once the process is let go.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "proc/freeze.hpp"
#include "proc/inject.hpp"

using namespace ckpt;
using namespace ckpt::proc;

namespace {

struct Shared {
  std::atomic<long> caught{0};
};

Shared* g_shared;

void on_signal(int) {
  g_shared->caught.fetch_add(1, std::memory_order_relaxed);
}

// A child that counts a real-time signal forever, and a second child that
// keeps its queue full (queued, not merged: one is always waiting): the
// target is in or near a signal delivery most of the time.
struct Storm {
  Shared* shared = nullptr;
  pid_t target = -1, sender = -1;

  Storm() {
    void* mem =
        ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shared = new (mem) Shared;
    int ready[2];
    if (::pipe(ready) != 0) return;
    target = ::fork();
    if (target == 0) {
      g_shared = shared;
      struct sigaction sa {};
      sa.sa_handler = on_signal;
      sa.sa_flags = SA_RESTART;
      ::sigaction(SIGRTMIN, &sa, nullptr);
      (void)!::write(ready[1], "r", 1);
      for (;;) {
      }
    }
    char c;
    (void)!::read(ready[0], &c, 1);
    ::close(ready[0]);
    ::close(ready[1]);
    sender = ::fork();
    if (sender == 0) {
      for (;;) {
        sigval v{};
        if (::sigqueue(target, SIGRTMIN, v) != 0) ::usleep(20);
      }
    }
  }
  ~Storm() {
    ::kill(sender, SIGKILL);
    ::kill(target, SIGKILL);
    ::waitpid(sender, nullptr, 0);
    ::waitpid(target, nullptr, 0);
    ::munmap(shared, sizeof(Shared));
  }
};

// Runs one injected getpid in the stopped thread, to its entry and exit
// stops: a stop left queued would come first and fail it.
Status one_call(pid_t pid) {
  return with_injected_calls(pid, [&](RemoteSyscall& rs) -> Status {
    CKPT_ASSIGN(long r, rs.call_to_exit(SYS_getpid));
    if (r != pid) return make_error(EIO, "getpid gave " + std::to_string(r));
    return {};
  });
}

}  // namespace

// The race made certain: the thread is already in its signal-delivery stop,
// not yet reaped, when the interrupt comes.
TEST(FreezeSignal, AnInterruptAfterASignalStopLeavesNothingQueued) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};
    ::sigaction(SIGUSR1, &sa, nullptr);
    ::close(ready[0]);
    (void)!::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(::ptrace(PTRACE_SEIZE, child, nullptr, (void*)PTRACE_O_TRACESYSGOOD), 0);
  ASSERT_EQ(::kill(child, SIGUSR1), 0);
  // The signal stop is reported once the thread is in it.
  for (int i = 0; i < 1000; ++i) {
    siginfo_t si{};
    if (::waitid(P_PID, child, &si, WSTOPPED | WNOWAIT | __WALL) == 0 && si.si_pid == child) break;
    ::usleep(1000);
  }
  auto stop = stop_seized_thread(child);
  ASSERT_TRUE(stop.ok()) << stop.error().message;
  EXPECT_EQ(stop->pending_signal, SIGUSR1);
  EXPECT_FALSE(stop->group_stopped);
  Status st = one_call(child);
  EXPECT_TRUE(st.ok()) << st.error().message;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, __WALL);
}

// The race as it comes: freezes of a target under a signal storm, until
// enough of them met a signal delivery.
TEST(FreezeSignal, AFreezeDuringASignalLeavesNoStopQueued) {
  Storm storm;
  ASSERT_GT(storm.sender, 0);
  while (storm.shared->caught.load() == 0) ::usleep(1000);
  int met = 0, rounds = 0;
  for (; rounds < 20000 && met < 5; ++rounds) {
    auto fp = FrozenProcess::freeze(storm.target);
    ASSERT_TRUE(fp.ok()) << fp.error().message;
    const int pending = (*fp)->threads()[0].pending_signal;
    if (pending != 0) {
      EXPECT_EQ(pending, SIGRTMIN);
      ++met;
    }
    Status st = one_call(storm.target);
    ASSERT_TRUE(st.ok()) << "round " << rounds << " (signal at the stop: " << pending
                         << "): " << st.error().message;
    ASSERT_TRUE((*fp)->release().ok());
  }
  // The race is what this test is about: it must have been met.
  EXPECT_EQ(met, 5) << "only " << met << " of " << rounds << " freezes met a signal delivery";
}
