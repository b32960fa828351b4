// proc::RemoteSyscall::call_batch / restore::CallBatch: calls run in a
// traced child in one round trip, in order, stopping at the first failure
// of a call that may not fail.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cstring>

#include "proc/inject.hpp"
#include "proc/regs.hpp"
#include "restore/call_batch.hpp"

using ckpt::proc::RemoteSyscall;

namespace {

// Room in the child for the table and strings (the same address after fork).
alignas(4096) char g_area[3 * 4096];

struct TracedChild {
  pid_t pid = -1;
  TracedChild() {
    pid = ::fork();
    if (pid == 0) {
      ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
  }
  ~TracedChild() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

RemoteSyscall::BatchCall call(long nr, uint64_t a1 = 0, bool may_fail = false) {
  RemoteSyscall::BatchCall c;
  c.nr = nr;
  c.a[0] = a1;
  c.may_fail = may_fail;
  return c;
}

}  // namespace

TEST(CallBatch, RunsInOrderAndStopsAtTheFirstFailure) {
  TracedChild child;
  auto regs = ckpt::proc::get_regs(child.pid);
  ASSERT_TRUE(regs.ok());
  RemoteSyscall rs(child.pid, *regs, reinterpret_cast<uint64_t>(ckpt_inject_insn));
  std::vector<RemoteSyscall::BatchCall> calls = {
      call(SYS_getpid), call(SYS_close, uint64_t(-1), true), call(SYS_getppid),
      call(SYS_close, uint64_t(-1)), call(SYS_getpid)};
  ASSERT_TRUE(rs.call_batch(reinterpret_cast<uint64_t>(ckpt_batch_code),
                            reinterpret_cast<uint64_t>(g_area), &calls)
                  .ok());
  EXPECT_EQ(calls[0].ret, child.pid);
  EXPECT_EQ(calls[1].ret, -EBADF);  // may fail: the batch went on
  EXPECT_EQ(calls[2].ret, ::getpid());
  EXPECT_EQ(calls[3].ret, -EBADF);
  EXPECT_EQ(calls[4].ret, RemoteSyscall::kNotRun);
}

TEST(CallBatch, StringsAndRoundsBeyondOneTable) {
  TracedChild child;
  auto regs = ckpt::proc::get_regs(child.pid);
  ASSERT_TRUE(regs.ok());
  RemoteSyscall rs(child.pid, *regs, reinterpret_cast<uint64_t>(ckpt_inject_insn));
  ckpt::restore::BatchArea area;
  area.code = reinterpret_cast<uint64_t>(ckpt_batch_code);
  area.table = reinterpret_cast<uint64_t>(g_area);
  area.max_calls = 4;  // several round trips
  area.strings = reinterpret_cast<uint64_t>(g_area) + 4096;
  area.strings_len = 64;  // several fills of the pool
  ckpt::restore::CallBatch batch(child.pid, rs, area);
  std::vector<size_t> opens;
  for (int i = 0; i < 10; ++i) {
    auto path = batch.add_string(i % 2 ? "/dev/null" : "/proc/self/status");
    ASSERT_TRUE(path.ok());
    opens.push_back(batch.add("opening", "test", SYS_openat, uint64_t(AT_FDCWD), *path,
                              uint64_t(O_RDONLY | O_CLOEXEC)));
  }
  ASSERT_TRUE(batch.run().ok());
  for (size_t i : opens) EXPECT_GE(batch.result(i), 3) << "call " << i;
  EXPECT_FALSE(batch.add_string(std::string(64, 'x')).ok()) << "longer than the pool";

  ckpt::restore::CallBatch failing(child.pid, rs, area);
  auto missing = failing.add_string("/nonexistent/for-call-batch");
  ASSERT_TRUE(missing.ok());
  failing.add("opening the missing file", "mapping x", SYS_openat, uint64_t(AT_FDCWD), *missing,
              uint64_t(O_RDONLY));
  size_t after = failing.add("getpid", "", SYS_getpid);
  auto st = failing.run();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ENOENT);
  EXPECT_NE(st.error().message.find("mapping x"), std::string::npos) << st.error().message;
  EXPECT_EQ(failing.result(after), RemoteSyscall::kNotRun);
}
