// dirty::LedgerHold: while a target is frozen, side state and the removal of
// dead processes' records wait in memory; reads see what waits.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dirty/ledger.hpp"

using namespace ckpt::dirty;

namespace {

std::string file_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

pid_t idle_child() {
  pid_t p = ::fork();
  if (p == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // gone with the test on a failed ASSERT
    ::pause();
    ::_exit(0);
  }
  return p;
}

void end_child(pid_t p) {
  ::kill(p, SIGKILL);
  ::waitpid(p, nullptr, 0);
}

// Runs `body` in a child with a ledger directory of its own. Other tests
// running at the same time write records too, and every write sweeps the
// records of dead processes: one this test keeps on purpose would go.
template <class Body>
void with_own_records(Body body) {
  pid_t child = ::fork();
  if (child == 0) {
    std::string own;
    bool ok = false;
    if (::geteuid() == 0) {
      ok = ::unshare(CLONE_NEWNS) == 0 &&
           ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           ::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0;
    } else {
      char tmpl[] = "/tmp/ckpt-ledger-test.XXXXXX";
      ok = ::mkdtemp(tmpl) != nullptr && ::setenv("XDG_RUNTIME_DIR", tmpl, 1) == 0;
      if (ok) own = tmpl;
    }
    if (!ok) {
      std::fprintf(stderr, "no ledger directory of its own: %s\n", std::strerror(errno));
      ::_exit(3);
    }
    body();
    if (!own.empty()) std::filesystem::remove_all(own);
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
      << "the test's child failed (its output above), status " << st;
}

}  // namespace

TEST(LedgerHold, SideStateWaitsInMemoryUntilWritten) {
  pid_t target = idle_child();
  TrackerState s;
  s.chain_id[0] = 0x4c;
  s.generation = 3;
  write_side_state(target, ".holdtest", s, "before\n");
  auto path = ledger_side_file(target, ".holdtest", false);
  ASSERT_TRUE(path.has_value());
  const std::string on_disk = file_text(*path);
  ASSERT_NE(on_disk.find("before"), std::string::npos);

  TrackerState next = s;
  next.prev_generation = 3;
  next.generation = 4;
  {
    LedgerHold hold;
    write_side_state(target, ".holdtest", next, "after\n");
    EXPECT_EQ(file_text(*path), on_disk) << "written to disk while held";
    // The next collect (parent 4) reads what waits.
    TrackerState child = next;
    child.prev_generation = 4;
    child.generation = 5;
    auto seen = read_side_state(target, ".holdtest", child);
    ASSERT_TRUE(seen.has_value());
    EXPECT_EQ(*seen, "after\n");
    hold.write();
    EXPECT_NE(file_text(*path).find("after"), std::string::npos);
    write_side_state(target, ".holdtest", child, "last\n");
  }
  // The hold's end writes what came after write().
  EXPECT_NE(file_text(*path).find("last"), std::string::npos);
  ::unlink(path->c_str());
  end_child(target);
}

TEST(LedgerHold, DeadRecordsRemovedOnlyOnceReleased) {
  with_own_records([] {
    pid_t gone = idle_child();
    LedgerEntry e{};
    e.chain_id[0] = 0x4d;
    e.generation = 1;
    ASSERT_TRUE(write_ledger(gone, e).ok());
    auto gone_path = ledger_side_file(gone, "", false);
    ASSERT_TRUE(gone_path.has_value());
    end_child(gone);

    pid_t live = idle_child();
    {
      LedgerHold hold;
      ASSERT_TRUE(write_ledger(live, e).ok());
      EXPECT_EQ(::access(gone_path->c_str(), F_OK), 0) << "a dead record was removed while held";
    }
    EXPECT_NE(::access(gone_path->c_str(), F_OK), 0) << "the dead record outlived the hold";
    ASSERT_TRUE(read_ledger(live).has_value());
    const std::string live_path = ledger_side_file(live, "", false).value_or("");
    ASSERT_FALSE(live_path.empty());
    end_child(live);
    // Without a hold, the next record sweeps the dead one at once.
    pid_t other = idle_child();
    ASSERT_TRUE(write_ledger(other, e).ok());
    EXPECT_NE(::access(live_path.c_str(), F_OK), 0);
    ::unlink(ledger_side_file(other, "", false).value_or("").c_str());
    end_child(other);
  });
}
