// The tracker list is the one source of names: every kind builds a Tracker
// of that name, the tools' choices and the C API list the same names in
// the same order, and the hash tracker works through the Tracker interface
// like the kernel ones.
#include <gtest/gtest.h>

#include <ckpt/ckpt.h>
#include <ckpt/check.hpp>
#include <ckpt/tracker.hpp>
#include <cstring>

#include "dirty/tracker.hpp"
#include "image_test_util.hpp"

namespace ckpt {
namespace {

TEST(TrackerKinds, EveryKindBuildsItsTrackerByKindAndByName) {
  ASSERT_EQ(tracker_kinds().size(), 4u);
  for (const TrackerInfo& t : tracker_kinds()) {
    SCOPED_TRACE(t.name);
    auto by_kind = dirty::make_tracker(t.kind);
    ASSERT_TRUE(by_kind);
    EXPECT_EQ(by_kind->kind(), t.kind);
    EXPECT_STREQ(by_kind->name(), t.name);
    auto by_name = dirty::make_tracker(std::string(t.name));
    ASSERT_TRUE(by_name);
    EXPECT_EQ(by_name->kind(), t.kind);
    ASSERT_NE(find_tracker(t.name), nullptr);
    EXPECT_EQ(find_tracker(t.name)->kind, t.kind);
  }
  EXPECT_EQ(find_tracker("auto"), nullptr);
  EXPECT_EQ(find_tracker("softdirty"), nullptr);
  EXPECT_EQ(dirty::make_tracker(std::string("")), nullptr);
  // Only content hashing works without the kernel, and it is the last resort.
  EXPECT_EQ(tracker_kinds().back().kind, TrackerKind::hash);
  for (const TrackerInfo& t : tracker_kinds()) EXPECT_EQ(t.kernel, t.kind != TrackerKind::hash);
}

TEST(TrackerKinds, ToolsCheckAndCApiShareTheList) {
  std::vector<std::string> want{"auto"};
  for (const TrackerInfo& t : tracker_kinds()) want.emplace_back(t.name);
  EXPECT_EQ(tracker_choices(), want);
  // cr_migrate's --tracker once lacked kmod although auto picks it.
  EXPECT_NE(std::find(want.begin(), want.end(), "kmod"), want.end());

  unsigned i = 0;
  for (; ckpt_tracker_name(i); ++i) {
    ASSERT_LT(i, tracker_kinds().size());
    EXPECT_STREQ(ckpt_tracker_name(i), tracker_kinds()[i].name);
  }
  EXPECT_EQ(i, tracker_kinds().size());

  std::vector<std::string> checked;
  for (const FeatureCheck& c : check_system())
    if (find_tracker(c.name)) checked.push_back(c.name);
  EXPECT_EQ(std::vector<std::string>(want.begin() + 1, want.end()), checked);
  EXPECT_TRUE(dirty::probe_tracker(TrackerKind::hash).ok);
  // auto: the first usable one, hash at worst.
  for (const TrackerInfo& t : tracker_kinds()) {
    if (&t == &auto_tracker()) break;
    EXPECT_FALSE(dirty::probe_tracker(t.kind).ok) << t.name << " works, yet auto skips it";
  }
  EXPECT_TRUE(dirty::probe_tracker(auto_tracker().kind).ok);
}

// Through the interface: arm keeps nothing in the process, collect asks for
// every page, and the filter passes on only the pages whose content changed
// since the parent's table.
TEST(TrackerKinds, HashTrackerJudgesPagesByContentThroughTheInterface) {
  constexpr size_t P = image::kPageSize;
  auto t = dirty::make_tracker(TrackerKind::hash);
  dirty::TrackerState st;
  st.target_fd = 7;
  ASSERT_TRUE(t->arm(::getpid(), {}, &st).ok());
  EXPECT_EQ(st.target_fd, -1);
  auto ds = t->collect(::getpid(), {}, {}, &st);
  ASSERT_TRUE(ds.ok());
  EXPECT_TRUE(ds->read_all);
  EXPECT_FALSE(ds->everything);

  std::vector<uint8_t> pages(4 * P);
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = uint8_t(i / P + 1);
  const uint64_t base = 0x10000000;
  testing::TempDir dir;
  std::array<uint8_t, 16> chain{};
  auto full = image::SnapshotWriter::create_in(dir.path() + "/full", 1, chain);
  ASSERT_TRUE(full.ok());
  const std::vector<image::PageHash> none;  // the filter keeps a reference to it
  auto f = t->filter(none, **full);
  ASSERT_TRUE(f);
  ASSERT_TRUE(f->add(base, pages.data(), 4).ok());
  std::vector<image::MemRange> complete;
  f->finish({}, &complete);
  EXPECT_EQ((*full)->pages(), 4u);
  const std::vector<image::PageHash> table = (*full)->page_hashes();
  ASSERT_EQ(table.size(), 4u);

  pages[2 * P] ^= 0xff;  // page 2 changes, the others do not
  auto incr = image::SnapshotWriter::create_in(dir.path() + "/incr", 2, chain);
  ASSERT_TRUE(incr.ok());
  auto g = t->filter(table, **incr);
  ASSERT_TRUE(g->add(base, pages.data(), 4).ok());
  g->finish({}, &complete);
  EXPECT_EQ((*incr)->pages(), 1u);
  ASSERT_EQ((*incr)->runs().size(), 1u);
  EXPECT_EQ((*incr)->runs()[0].vaddr, base + 2 * P);
}

}  // namespace
}  // namespace ckpt
