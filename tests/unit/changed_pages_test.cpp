// dirty/changed_pages: an incremental keeps only the pages whose content
// differs from the parent generation's table, records every page it read,
// and counts per 2 MiB block what changed.
#include <gtest/gtest.h>

#include "dirty/adaptive.hpp"
#include "dirty/changed_pages.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "image_test_util.hpp"
#include "util/hash.hpp"

namespace ckpt::dirty {
namespace {

using ckpt::testing::AlignedBytes;
using ckpt::testing::TempDir;
using image::kPageSize;

constexpr uint64_t kBase = 0x7f0000000000;  // 2 MiB-aligned

TEST(ChangedPages, KeepsChangedAndNewPagesRecordsAllAndCountsPerBlock) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(34);
  auto w = image::SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok()) << w.error().message;
  // 8 pages at the start of block 0, 4 pages at the start of block 1.
  AlignedBytes mem(12 * kPageSize);
  for (uint64_t i = 0; i < 12; ++i) ckpt::testing::fill_page(&mem[i * kPageSize], i);
  auto va = [](uint64_t i) {
    return i < 8 ? kBase + i * kPageSize : kBase + kAdaptiveBlock + (i - 8) * kPageSize;
  };
  // The parent's table: every page of block 0 as it is now except pages 2
  // and 5 (changed since); nothing for page 7 (not read then) nor block 1.
  std::vector<image::PageHash> prev;
  for (uint64_t i = 0; i < 7; ++i)
    prev.push_back({va(i), i == 2 || i == 5 ? 1 : xxh3(&mem[i * kPageSize], kPageSize)});
  BlockContentMap counted;
  bool done = false;
  ChangedPagesFilter f(prev, **w, [&](const BlockContentMap& b) {
    counted = b;
    done = true;
  });
  ASSERT_TRUE(f.add(va(0), &mem[0], 8).ok());
  ASSERT_TRUE(f.add(va(8), &mem[8 * kPageSize], 4).ok());
  std::vector<image::MemRange> complete;
  f.finish({}, &complete);
  ASSERT_TRUE(done);
  EXPECT_EQ(f.pages_unchanged(), 5u);  // 0, 1, 3, 4, 6
  EXPECT_EQ((*w)->pages(), 7u);        // 2, 5, 7 and block 1's four
  ASSERT_EQ(counted.size(), 2u);
  EXPECT_EQ(counted[kBase].read, 8u);
  EXPECT_EQ(counted[kBase].changed, 3u);
  EXPECT_EQ(counted[kBase + kAdaptiveBlock].read, 4u);
  EXPECT_EQ(counted[kBase + kAdaptiveBlock].changed, 4u);
  // The table holds every page read, kept or not, with its content's hash.
  const std::vector<image::PageHash>& table = (*w)->page_hashes();
  ASSERT_EQ(table.size(), 12u);
  for (uint64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(table[i].vaddr, va(i));
    EXPECT_EQ(table[i].hash, xxh3(&mem[i * kPageSize], kPageSize));
  }
  // What the generation stores: exactly the kept pages.
  ASSERT_TRUE((*w)->commit(ckpt::testing::make_meta(1, chain)).ok());
  auto r = image::SnapshotReader::open(image::generation_dir(tmp.path(), 1));
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::vector<uint64_t> stored;
  for (const image::PageRun& run : (*r)->runs())
    for (uint32_t p = 0; p < run.npages; ++p) stored.push_back(run.vaddr + p * kPageSize);
  EXPECT_EQ(stored, (std::vector<uint64_t>{va(2), va(5), va(7), va(8), va(9), va(10), va(11)}));
  EXPECT_EQ((*r)->page_hashes().size(), 12u);
}

TEST(ChangedPages, BlockCountsSurviveTheSideFileFormat) {
  BlockContentMap b;
  b[kBase] = {512, 3};
  b[kBase + kAdaptiveBlock] = {40, 40};
  BlockContentMap back = parse_block_content(format_block_content(b));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[kBase].read, 512u);
  EXPECT_EQ(back[kBase].changed, 3u);
  EXPECT_EQ(back[kBase + kAdaptiveBlock].changed, 40u);
  EXPECT_TRUE(parse_block_content("garbage\n").empty());
}

}  // namespace
}  // namespace ckpt::dirty
