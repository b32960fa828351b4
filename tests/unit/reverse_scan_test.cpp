// plan_reverse_scan(): which generation each restored page comes from.
#include <gtest/gtest.h>

#include "image/chain.hpp"

namespace ckpt::image {
namespace {

constexpr uint64_t P = kPageSize;

PageRun run(uint64_t page, uint32_t n, bool zero = false) {
  PageRun r;
  r.vaddr = page * P;
  r.npages = n;
  r.flags = zero ? uint32_t(kRunZero) : 0u;
  return r;
}

VmaRecord vma(uint64_t first_page, uint64_t end_page, uint32_t flags = 0) {
  VmaRecord v;
  v.start = first_page * P;
  v.end = end_page * P;
  v.flags = flags;
  return v;
}

// The restored layout only: older generations' layouts unknown.
RestorePlan plan(const std::vector<const std::vector<PageRun>*>& links,
                 const std::vector<std::vector<MemRange>>& complete, std::vector<VmaRecord> vmas) {
  return plan_reverse_scan(links, complete, {&vmas});
}

// Expands a plan to "page -> generation index" for easy comparison.
std::map<uint64_t, uint32_t> owners(const RestorePlan& plan) {
  std::map<uint64_t, uint32_t> out;
  for (const PlanSlice& s : plan.slices)
    for (uint32_t i = 0; i < s.npages; ++i) {
      EXPECT_EQ(out.count(s.vaddr / P + i), 0u) << "page written twice";
      out[s.vaddr / P + i] = s.link;
    }
  return out;
}

TEST(ReverseScan, NewestGenerationWinsEachPageOnce) {
  std::vector<PageRun> full = {run(0, 8)}, inc1 = {run(2, 2)}, inc2 = {run(3, 2)};
  RestorePlan plan = ckpt::image::plan({&inc2, &inc1, &full}, {{}, {}, {}}, {vma(0, 8)});
  auto own = owners(plan);
  std::map<uint64_t, uint32_t> want = {{0, 2}, {1, 2}, {2, 1}, {3, 0},
                                       {4, 0}, {5, 2}, {6, 2}, {7, 2}};
  EXPECT_EQ(own, want);
  EXPECT_EQ(plan.pages_written, 8u);
  EXPECT_EQ(plan.pages_skipped, 4u);  // full's pages 2-4 and inc1's page 3: superseded
}

TEST(ReverseScan, PagesOfVanishedMappingsAreSkipped) {
  std::vector<PageRun> full = {run(0, 4), run(10, 4)}, inc = {run(1, 1)};
  // The restored layout no longer has pages 2-3 and 10-13.
  RestorePlan plan = ckpt::image::plan({&inc, &full}, {{}, {}}, {vma(0, 2), vma(20, 30)});
  std::map<uint64_t, uint32_t> want = {{0, 1}, {1, 0}};
  EXPECT_EQ(owners(plan), want);
  EXPECT_EQ(plan.pages_skipped, 2u + 4u + 1u);
}

TEST(ReverseScan, CompleteRangesHideOlderContent) {
  // Between full and inc the process replaced pages 4-7 with a fresh mapping
  // and touched only page 5 there: the full's old content of 4, 6, 7 must not
  // come back.
  std::vector<PageRun> full = {run(0, 8)}, inc = {run(5, 1)};
  RestorePlan plan = ckpt::image::plan({&inc, &full}, {{{4 * P, 8 * P}}, {}}, {vma(0, 8)});
  std::map<uint64_t, uint32_t> want = {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {5, 0}};
  EXPECT_EQ(owners(plan), want);
}

TEST(ReverseScan, ZeroRunsResolvePagesToo) {
  // MADV_DONTNEED between generations: the incremental records page 1 as zero.
  std::vector<PageRun> full = {run(0, 3)}, inc = {run(1, 1, true)};
  RestorePlan plan = ckpt::image::plan({&inc, &full}, {{}, {}}, {vma(0, 3)});
  auto own = owners(plan);
  EXPECT_EQ(own[1], 0u);
  for (const PlanSlice& s : plan.slices) {
    if (s.vaddr == P) {
      EXPECT_TRUE(s.zero());
    }
  }
}

TEST(ReverseScan, SlicesPointIntoTheirRun) {
  std::vector<PageRun> full = {run(0, 10)}, inc = {run(3, 2)};
  RestorePlan plan = ckpt::image::plan({&inc, &full}, {{}, {}}, {vma(0, 10)});
  ASSERT_EQ(plan.slices.size(), 3u);
  EXPECT_EQ(plan.slices[0].first_page, 0u);
  EXPECT_EQ(plan.slices[0].npages, 3u);
  EXPECT_EQ(plan.slices[2].vaddr, 5 * P);
  EXPECT_EQ(plan.slices[2].first_page, 5u);
  EXPECT_EQ(plan.slices[2].npages, 5u);
  EXPECT_EQ(plan.runs_used.size(), 2u);
}

TEST(ReverseScan, SpecialMappingsNeverReceiveContent) {
  std::vector<PageRun> full = {run(0, 4)};
  RestorePlan plan = ckpt::image::plan({&full}, {{}}, {vma(0, 2), vma(2, 4, kVmaVdso)});
  EXPECT_EQ(plan.pages_written, 2u);
}

TEST(ReverseScan, AddressesUnmappedInBetweenDoNotShowOlderContent) {
  // Full: pages 0-3 written. Gen 2: the mapping is gone. Gen 3: mapped again
  // at the same place, only page 0 written: pages 1-3 must stay fresh.
  std::vector<PageRun> full = {run(0, 4)}, gone = {}, again = {run(0, 1)};
  std::vector<VmaRecord> l_full = {vma(0, 4), vma(10, 11)}, l_gone = {vma(10, 11)},
                         l_again = {vma(0, 4), vma(10, 11)};
  RestorePlan p =
      plan_reverse_scan({&again, &gone, &full}, {{}, {}, {}}, {&l_again, &l_gone, &l_full});
  std::map<uint64_t, uint32_t> want = {{0, 0}};
  EXPECT_EQ(owners(p), want);
}

}  // namespace
}  // namespace ckpt::image
