// migrate/handover: what a connection handler whose monitor died reads from
// the kernel about the process the monitor held. Real processes: a target,
// and a tracer that holds it as cr_recv's monitor does (PTRACE_O_EXITKILL),
// then is killed before or after letting it go.
#include "migrate/handover.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace ckpt::migrate {
namespace {

// A /proc/PID/stat line with `flags` (its name holds a space and a parenthesis).
std::string stat_line(unsigned long flags) {
  return "123 (a b) c) S 1 123 123 0 -1 " + std::to_string(flags) + " 0 0 0 0";
}

TEST(Handover, ParsesTheStatusFields) {
  HeldState s;
  const std::string quiet = stat_line(0x400100);  // PF_RANDOMIZE-like bits only
  ASSERT_TRUE(parse_held_state(
      "Name:\tx\nState:\tt (tracing stop)\nTracerPid:\t41\nSigPnd:\t0000000000000000\n"
      "ShdPnd:\t0000000000000000\n",
      quiet.c_str(), &s));
  EXPECT_TRUE(s.traced);
  EXPECT_FALSE(s.exiting);
  EXPECT_FALSE(s.kill_pending);
  ASSERT_TRUE(parse_held_state(
      "State:\tR (running)\nTracerPid:\t0\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000100\n",
      quiet.c_str(), &s));
  EXPECT_FALSE(s.traced);
  EXPECT_TRUE(s.kill_pending);  // bit 8: SIGKILL
  ASSERT_TRUE(parse_held_state("State:\tZ (zombie)\nTracerPid:\t0\n", quiet.c_str(), &s));
  EXPECT_TRUE(s.exiting);
  ASSERT_TRUE(parse_held_state("State:\tS (sleeping)\nTracerPid:\t0\nSigPnd:\t0000000000000200\n",
                               quiet.c_str(), &s));
  EXPECT_FALSE(s.kill_pending);  // bit 9 is SIGUSR1
  EXPECT_FALSE(s.exiting);
  // Its SIGKILL already taken, on its way out: running by its state alone.
  const std::string signaled = stat_line(0x400500), exiting_flag = stat_line(0x400104);
  ASSERT_TRUE(parse_held_state("State:\tR (running)\nTracerPid:\t0\n", signaled.c_str(), &s));
  EXPECT_TRUE(s.exiting);
  ASSERT_TRUE(parse_held_state("State:\tR (running)\nTracerPid:\t0\n", exiting_flag.c_str(), &s));
  EXPECT_TRUE(s.exiting);
  EXPECT_FALSE(parse_held_state("Name:\tx\n", quiet.c_str(), &s));
  EXPECT_FALSE(parse_held_state("State:\tR\nTracerPid:\t0\n", "123 (x", &s));
}

// A target that sleeps, and a tracer that seizes it with EXITKILL, stops
// it, optionally lets it go, reports, and waits to be killed.
struct Held {
  pid_t target = 0, tracer = 0;

  void start(bool let_go) {
    target = ::fork();
    ASSERT_GE(target, 0);
    if (target == 0) {
      for (;;) ::pause();
    }
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    tracer = ::fork();
    ASSERT_GE(tracer, 0);
    if (tracer == 0) {
      ::close(p[0]);
      char ok = 0;
      int st;
      if (::ptrace(PTRACE_SEIZE, target, nullptr, (void*)(long)PTRACE_O_EXITKILL) == 0 &&
          ::ptrace(PTRACE_INTERRUPT, target, nullptr, nullptr) == 0 &&
          ::waitpid(target, &st, __WALL) == target &&
          (!let_go || ::ptrace(PTRACE_DETACH, target, nullptr, nullptr) == 0))
        ok = 1;
      (void)!::write(p[1], &ok, 1);
      for (;;) ::pause();
    }
    ::close(p[1]);
    char ok = 0;
    ASSERT_EQ(::read(p[0], &ok, 1), 1);
    ::close(p[0]);
    ASSERT_EQ(ok, 1) << "the tracer could not hold the target (ptrace refused?)";
  }

  ~Held() {
    for (pid_t p : {tracer, target})
      if (p > 0) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
  }
};

class HandoverProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (a sibling is traced)";
  }
};

TEST_F(HandoverProcess, AProcessHeldWhenItsTracerDiedIsLost) {
  Held h;
  ASSERT_NO_FATAL_FAILURE(h.start(false));
  auto held = open_held(h.target);
  ASSERT_TRUE(held.ok()) << held.error().message;
  ASSERT_EQ(::kill(h.tracer, SIGKILL), 0);
  // Asked at once, as the handler does when its control socket closes: the
  // tracer may not have let go yet.
  EXPECT_FALSE(held_process_runs(*held, 10));
}

TEST_F(HandoverProcess, AProcessLetGoBeforeItsTracerDiedRuns) {
  Held h;
  ASSERT_NO_FATAL_FAILURE(h.start(true));
  auto held = open_held(h.target);
  ASSERT_TRUE(held.ok()) << held.error().message;
  ASSERT_EQ(::kill(h.tracer, SIGKILL), 0);
  EXPECT_TRUE(held_process_runs(*held, 10));
  EXPECT_EQ(::kill(h.target, 0), 0);  // and it does
}

TEST_F(HandoverProcess, AProcessStillHeldIsNotRunning) {
  Held h;
  ASSERT_NO_FATAL_FAILURE(h.start(false));
  auto held = open_held(h.target);
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_FALSE(held_process_runs(*held, 0.2));  // the tracer lives: it never lets go
}

}  // namespace
}  // namespace ckpt::migrate
