// libckpt's kmod tracker against a real child process and the ckpt_dirty
// module. Skipped (with the reason) where the module is not loaded, such as
// the development kernel; runs in the Debian-kernel guest of tests/kernel.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "dirty/kmod.hpp"

namespace ckpt::dirty {
namespace {

constexpr uint64_t P = image::kPageSize;
constexpr int kPages = 64;

// A child with kPages populated pages that writes ('w') or drops ('d') page
// N on command and answers one byte when done. This process is its ptrace
// tracer, as a checkpointer is (the module's permission rule).
struct Child {
  pid_t pid = 0;
  int cmd = -1, ack = -1;
  uint64_t base = 0;

  void start() {
    int c[2], a[2], b[2];
    ASSERT_EQ(::pipe(c), 0);
    ASSERT_EQ(::pipe(a), 0);
    ASSERT_EQ(::pipe(b), 0);
    pid = ::fork();
    if (pid == 0) {
      auto* mem = static_cast<char*>(
          ::mmap(nullptr, kPages * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      ::madvise(mem, kPages * P, MADV_NOHUGEPAGE);
      for (int i = 0; i < kPages; ++i) mem[i * P] = 1;
      // Fresh pages sit in a per-CPU LRU batch for a while (a reference the
      // module counts as a possible writer): push them out with more.
      auto* filler = static_cast<char*>(
          ::mmap(nullptr, 64 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      for (int i = 0; i < 64; ++i) filler[i * P] = 1;
      uint64_t addr = reinterpret_cast<uint64_t>(mem);
      (void)!::write(b[1], &addr, sizeof addr);
      char op[2];
      while (::read(c[0], op, 2) == 2) {
        if (op[0] == 'w') mem[op[1] * P + 7] = 42;
        if (op[0] == 'd') ::madvise(mem + op[1] * P, P, MADV_DONTNEED);
        (void)!::write(a[1], "k", 1);
      }
      ::_exit(0);
    }
    cmd = c[1];
    ack = a[0];
    ASSERT_EQ(::read(b[0], &base, sizeof base), ssize_t(sizeof base));
    ASSERT_EQ(::ptrace(PTRACE_SEIZE, pid, nullptr, nullptr), 0);
  }
  void op(char what, int page) {
    char o[2] = {what, char(page)};
    ASSERT_EQ(::write(cmd, o, 2), 2);
    char k;
    ASSERT_EQ(::read(ack, &k, 1), 1);
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, __WALL);
    }
  }
};

std::set<int> pages_of(const std::vector<mem::Range>& ranges, uint64_t base) {
  std::set<int> out;
  for (const auto& r : ranges)
    for (uint64_t a = r.addr; a < r.end(); a += P)
      if (a >= base && a < base + kPages * P) out.insert(int((a - base) / P));
  return out;
}

class KmodTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FeatureCheck c = KmodTracker::probe();
    if (!c.ok) GTEST_SKIP() << "ckpt_dirty module unavailable: " << c.detail;
    child_.start();
    image::VmaRecord v;
    v.start = child_.base;
    v.end = child_.base + kPages * P;
    v.prot = PROT_READ | PROT_WRITE;
    vmas_ = {v};
  }
  Child child_;
  std::vector<image::VmaRecord> vmas_;
  KmodTracker t_;
};

TEST_F(KmodTrackerTest, ReportsExactlyTheWrittenPagesAndDroppedOnes) {
  TrackerState st;
  ASSERT_TRUE(t_.arm(child_.pid, vmas_, &st).ok());
  EXPECT_GT(st.target_fd, 0);  // the module's token
  for (int p : {3, 10, 11}) child_.op('w', p);
  auto d = t_.collect(child_.pid, vmas_, vmas_, &st);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_FALSE(d->everything) << d->reason;
  EXPECT_EQ(pages_of(d->written, child_.base), (std::set<int>{3, 10, 11}));
  EXPECT_TRUE(d->unknown.empty());

  child_.op('d', 20);
  child_.op('w', 40);
  d = t_.collect(child_.pid, vmas_, vmas_, &st);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(pages_of(d->written, child_.base), (std::set<int>{20, 40}));

  // A mapping absent from the previous layout is unknown as a whole.
  d = t_.collect(child_.pid, vmas_, {}, &st);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(pages_of(d->unknown, child_.base).size(), size_t(kPages));
}

TEST_F(KmodTrackerTest, AStaleTokenMeansEverything) {
  TrackerState st;
  ASSERT_TRUE(t_.arm(child_.pid, vmas_, &st).ok());
  TrackerState old = st;
  auto d = t_.collect(child_.pid, vmas_, vmas_, &st);  // st gets the next token
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->everything);
  // A checkpoint that collected but was never committed: the next one starts
  // from the older generation's token and must save everything.
  d = t_.collect(child_.pid, vmas_, vmas_, &old);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->everything);
  EXPECT_NE(d->reason.find("reset"), std::string::npos) << d->reason;
  // ... and it armed afresh: the chain goes on exactly from there.
  child_.op('w', 5);
  d = t_.collect(child_.pid, vmas_, vmas_, &old);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->everything) << d->reason;
  EXPECT_EQ(pages_of(d->written, child_.base), (std::set<int>{5}));
}

TEST_F(KmodTrackerTest, NotArmedMeansEverything) {
  TrackerState st;  // no token
  auto d = t_.collect(child_.pid, vmas_, vmas_, &st);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->everything);
  EXPECT_GT(st.target_fd, 0);  // armed now
}

TEST_F(KmodTrackerTest, ARestoredProcessContinuesTheChainsToken) {
  TrackerState st;
  st.target_fd = 4242;  // the token in the restored generation's metadata
  st.continue_chain = true;
  ASSERT_TRUE(t_.arm(child_.pid, vmas_, &st).ok());
  EXPECT_EQ(st.target_fd, 4242);
  child_.op('w', 7);
  TrackerState next;
  next.target_fd = 4242;  // what the next cr_incr reads from the metadata
  auto d = t_.collect(child_.pid, vmas_, vmas_, &next);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->everything) << d->reason;
  EXPECT_EQ(pages_of(d->written, child_.base), (std::set<int>{7}));
}

}  // namespace
}  // namespace ckpt::dirty
