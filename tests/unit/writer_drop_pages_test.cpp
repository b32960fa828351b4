// SnapshotWriter::drop_pages (live checkpoints): pages copied by a pre-copy
// round and written again later are forgotten and replaced; pages outside the
// final memory are dropped; runs cut in two keep verifiable content hashes.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "image_test_util.hpp"

namespace ckpt::image {
namespace {

using ckpt::testing::AlignedBytes;
using ckpt::testing::TempDir;

constexpr uint64_t kBase = 0x10000;

// Page content identified by (page number, version).
void fill(uint8_t* p, uint64_t page, uint64_t version) {
  ckpt::testing::fill_page(p, page * 1000 + version);
}

TEST(WriterDropPages, ReplacedAndUnmappedPagesLeaveTheGeneration) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(21);
  auto w = SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok()) << w.error().message;
  // Round 1: pages 0..7, pages 4 and 5 zero, all in one run of content pages
  // 0..3 and one of 6..7.
  AlignedBytes r1(8 * kPageSize);
  for (uint64_t i = 0; i < 8; ++i)
    if (i != 4 && i != 5) fill(&r1[i * kPageSize], i, 1);
  ASSERT_TRUE((*w)->add_pages(kBase, r1.data(), 8).ok());
  // Round 2: pages 2 and 5 were written since (5 is no longer zero).
  std::vector<MemRange> written{{kBase + 2 * kPageSize, kBase + 3 * kPageSize},
                                {kBase + 5 * kPageSize, kBase + 6 * kPageSize}};
  Status st = (*w)->drop_pages(written, false);
  ASSERT_TRUE(st.ok()) << st.error().message;
  AlignedBytes r2(kPageSize);
  fill(r2.data(), 2, 2);
  ASSERT_TRUE((*w)->add_pages(kBase + 2 * kPageSize, r2.data(), 1).ok());
  fill(r2.data(), 5, 2);
  ASSERT_TRUE((*w)->add_pages(kBase + 5 * kPageSize, r2.data(), 1).ok());
  // Final: page 7 was unmapped.
  st = (*w)->drop_pages({{kBase, kBase + 7 * kPageSize}}, true);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ((*w)->pages(), 7u);
  ASSERT_TRUE((*w)->commit(ckpt::testing::make_meta(1, chain)).ok());

  auto r = SnapshotReader::open(generation_dir(tmp.path(), 1));
  ASSERT_TRUE(r.ok()) << r.error().message;
  Status v = (*r)->verify_all();
  EXPECT_TRUE(v.ok()) << v.error().message;
  // Every page appears once, with its newest content.
  std::map<uint64_t, std::pair<bool, const uint8_t*>> page;  // page -> (zero, content)
  for (const PageRun& run : (*r)->runs())
    for (uint32_t k = 0; k < run.npages; ++k) {
      uint64_t pg = (run.vaddr - kBase) / kPageSize + k;
      EXPECT_EQ(page.count(pg), 0u) << "page " << pg << " twice";
      page[pg] = {run.zero(), run.zero() ? nullptr : (*r)->content(run) + k * kPageSize};
    }
  ASSERT_EQ(page.size(), 7u);
  EXPECT_EQ(page.count(7), 0u);
  AlignedBytes want(kPageSize);
  for (uint64_t pg = 0; pg < 7; ++pg) {
    if (pg == 4) {
      EXPECT_TRUE(page[pg].first) << "page 4 stays a zero page";
      continue;
    }
    ASSERT_FALSE(page[pg].first) << "page " << pg;
    fill(want.data(), pg, pg == 2 || pg == 5 ? 2 : 1);
    EXPECT_EQ(std::memcmp(page[pg].second, want.data(), kPageSize), 0) << "page " << pg;
  }
}

}  // namespace
}  // namespace ckpt::image
