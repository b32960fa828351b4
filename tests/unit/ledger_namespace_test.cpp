// Tracking records (dirty/ledger) of one PID namespace survive a tool in
// another: cr_recv runs in a PID namespace of its own with its own /proc,
// where this namespace's PIDs do not exist, and it used to remove their
// live records as dead (the next incremental then saved everything).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dirty/ledger.hpp"

using namespace ckpt::dirty;

TEST(LedgerNamespace, AnotherPidNamespaceLeavesOurRecordsAlone) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: new PID and mount namespaces";
  pid_t target = ::fork();
  if (target == 0) {
    ::pause();
    ::_exit(0);
  }
  LedgerEntry mine{};
  mine.chain_id[0] = 0x5e;
  mine.generation = 7;
  ASSERT_TRUE(write_ledger(target, mine).ok());
  ASSERT_TRUE(read_ledger(target).has_value());

  // A tool in a new PID namespace with its own /proc writes its own record,
  // which sweeps the records it believes dead.
  pid_t outer = ::fork();
  if (outer == 0) {
    if (::unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) ::_exit(3);
    pid_t inner = ::fork();
    if (inner == 0) {
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
          ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        ::_exit(4);
      LedgerEntry theirs{};
      theirs.generation = 1;
      ::_exit(write_ledger(::getpid(), theirs).ok() ? 0 : 5);
    }
    int st = 0;
    ::waitpid(inner, &st, 0);
    ::_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 6);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(outer, &st, 0), outer);
  ASSERT_TRUE(WIFEXITED(st));
  if (WEXITSTATUS(st) == 3 || WEXITSTATUS(st) == 4) GTEST_SKIP() << "cannot make namespaces here";
  EXPECT_EQ(WEXITSTATUS(st), 0);
  auto still = read_ledger(target);
  EXPECT_TRUE(still.has_value()) << "a tool in another PID namespace removed a live record";
  if (still) {
    EXPECT_EQ(still->generation, 7u);
  }
  ::kill(target, SIGKILL);
  ::waitpid(target, nullptr, 0);
}
