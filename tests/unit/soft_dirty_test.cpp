// The soft-dirty tracker against a real child process. Skipped (with the
// reason) on kernels without CONFIG_MEM_SOFT_DIRTY, such as the development
// kernel; runs in the Debian-kernel guest of tests/kernel.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "page_child.hpp"

#include "dirty/soft_dirty.hpp"

namespace ckpt::dirty {
namespace {

constexpr uint64_t P = testing::kChildPage;
constexpr int kPages = testing::kChildPages;
using Child = testing::PageChild;
using testing::pages_of;

TEST(SoftDirty, ReportsExactlyTheWrittenPagesAndDroppedOnes) {
  FeatureCheck c = SoftDirtyTracker::probe();
  if (!c.ok) GTEST_SKIP() << "kernel lacks soft-dirty: " << c.detail;
  Child child;
  child.start(/*traced=*/false);
  image::VmaRecord v;
  v.start = child.base;
  v.end = child.base + kPages * P;
  v.prot = PROT_READ | PROT_WRITE;
  std::vector<image::VmaRecord> vmas = {v};
  SoftDirtyTracker t;
  TrackerState st;
  ASSERT_TRUE(t.arm(child.pid, vmas, &st).ok());
  for (int p : {3, 10, 11}) child.op('w', p);
  auto d = t.collect(child.pid, vmas, vmas, &st);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(pages_of(d->written, child.base), (std::set<int>{3, 10, 11}));
  EXPECT_TRUE(d->unknown.empty());

  // Next round: tracking restarted; a dropped page is reported, a written one too.
  child.op('d', 20);
  child.op('w', 40);
  d = t.collect(child.pid, vmas, vmas, &st);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(pages_of(d->written, child.base), (std::set<int>{20, 40}));

  // A mapping absent from the previous layout is unknown as a whole.
  d = t.collect(child.pid, vmas, {}, &st);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(pages_of(d->unknown, child.base).size(), size_t(kPages));
}

}  // namespace
}  // namespace ckpt::dirty
