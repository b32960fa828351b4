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

#include "page_child.hpp"

#include "dirty/kmod.hpp"

namespace ckpt::dirty {
namespace {

constexpr uint64_t P = testing::kChildPage;
constexpr int kPages = testing::kChildPages;
using Child = testing::PageChild;
using testing::pages_of;

class KmodTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FeatureCheck c = KmodTracker::probe();
    if (!c.ok) GTEST_SKIP() << "ckpt_dirty module unavailable: " << c.detail;
    child_.start(/*traced=*/true);
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
