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

// A page that compresses: its identity in the first word, then one byte
// value throughout.
void fill_compressible(uint8_t* p, uint64_t page, uint64_t version) {
  std::memset(p, int(1 + (page * 7 + version) % 250), kPageSize);
  const uint64_t id = page * 1000 + version;
  std::memcpy(p, &id, sizeof id);
}

// Pages [0, n) of a committed generation at kBase, decompressed where needed;
// every page must appear once.
std::map<uint64_t, std::vector<uint8_t>> read_pages(const SnapshotReader& r) {
  std::map<uint64_t, std::vector<uint8_t>> out;
  for (const PageRun& run : r.runs()) {
    Status v = r.verify_run(run);
    EXPECT_TRUE(v.ok()) << v.error().message;
    for (uint32_t k = 0; k < run.npages; ++k) {
      uint64_t pg = (run.vaddr - kBase) / kPageSize + k;
      EXPECT_EQ(out.count(pg), 0u) << "page " << pg << " twice";
      std::vector<uint8_t>& page = out[pg];
      page.assign(kPageSize, 0);
      if (!run.zero()) std::memcpy(page.data(), r.content(run) + k * kPageSize, kPageSize);
    }
  }
  return out;
}

// The committed generation 1 in `dir` verifies and holds pages [0, n) at
// kBase, each filled by fill_compressible with `version(page)`.
template <typename VersionOf>
void expect_pages(const std::string& dir, uint64_t n, VersionOf version) {
  auto r = SnapshotReader::open(generation_dir(dir, 1));
  ASSERT_TRUE(r.ok()) << r.error().message;
  Status v = (*r)->verify_all();
  EXPECT_TRUE(v.ok()) << v.error().message;
  auto pages = read_pages(**r);
  ASSERT_EQ(pages.size(), n);
  AlignedBytes want(kPageSize);
  for (uint64_t pg = 0; pg < n; ++pg) {
    fill_compressible(want.data(), pg, version(pg));
    EXPECT_EQ(std::memcmp(pages[pg].data(), want.data(), kPageSize), 0) << "page " << pg;
  }
}

// --compress with --live: a frame that a later round cuts keeps its other
// pages (appended plain), a frame kept whole stays compressed, and commit
// closes the holes by sliding content down; every page reads back as its
// newest version.
TEST(WriterDropPages, CompressedRunsCutByALaterRound) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(22);
  auto w = SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok()) << w.error().message;
  (*w)->set_compression(3, 1);
  // Round 1: four calls, runs of pages 0..15, 16..31, 32..47 and 48..63.
  AlignedBytes r1(16 * kPageSize);
  for (uint64_t c = 0; c < 4; ++c) {
    for (uint64_t i = 0; i < 16; ++i) fill_compressible(&r1[i * kPageSize], c * 16 + i, 1);
    ASSERT_TRUE((*w)->add_pages(kBase + c * 16 * kPageSize, r1.data(), 16).ok());
  }
  size_t frames = 0;
  for (const PageRun& run : (*w)->runs()) frames += run.compressed();
  ASSERT_EQ(frames, 4u) << "the pages were meant to compress";
  // Round 2: pages 3 and 20..23 were written since (the first frame and the
  // second are cut), and pages 40..63 were unmapped (the third frame is cut,
  // the fourth goes whole); then the new content comes, last in the file.
  std::vector<MemRange> written{{kBase + 3 * kPageSize, kBase + 4 * kPageSize},
                                {kBase + 20 * kPageSize, kBase + 24 * kPageSize}};
  Status st = (*w)->drop_pages(written, false);
  ASSERT_TRUE(st.ok()) << st.error().message;
  st = (*w)->drop_pages({{kBase, kBase + 40 * kPageSize}}, true);
  ASSERT_TRUE(st.ok()) << st.error().message;
  AlignedBytes r2(4 * kPageSize);
  fill_compressible(r2.data(), 3, 2);
  ASSERT_TRUE((*w)->add_pages(kBase + 3 * kPageSize, r2.data(), 1).ok());
  for (uint64_t i = 0; i < 4; ++i) fill_compressible(&r2[i * kPageSize], 20 + i, 2);
  ASSERT_TRUE((*w)->add_pages(kBase + 20 * kPageSize, r2.data(), 4).ok());
  EXPECT_EQ((*w)->pages(), 40u);
  ASSERT_TRUE((*w)->commit(ckpt::testing::make_meta(1, chain)).ok());
  expect_pages(tmp.path(), 40,
               [](uint64_t pg) { return pg == 3 || (pg >= 20 && pg < 24) ? 2 : 1; });
  auto r = SnapshotReader::open(generation_dir(tmp.path(), 1));
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Pages 20..23 came as a new frame; 0..2, 4..15, 16..19, 24..31 and 32..39
  // are plain parts of cut frames.
  size_t compressed = 0;
  for (const PageRun& run : (*r)->runs()) compressed += run.compressed();
  EXPECT_EQ(compressed, 1u);
}

// Cuts are settled at commit (drop_pages itself only changes the index, so
// that a frozen final round does not read back and hash the process): parts
// cut again by later rounds, of a plain run and of a frame, still end with
// the right content and hashes, and runs added between the drops stay.
TEST(WriterDropPages, PartsCutAgainByLaterRounds) {
  for (int level : {0, 3}) {
    SCOPED_TRACE(level ? "compressed" : "plain");
    TempDir tmp;
    const auto chain = ckpt::testing::make_chain_id(23);
    auto w = SnapshotWriter::create(tmp.path(), 1, chain);
    ASSERT_TRUE(w.ok()) << w.error().message;
    if (level) (*w)->set_compression(level, 1);
    AlignedBytes buf(32 * kPageSize);
    for (uint64_t i = 0; i < 32; ++i) fill_compressible(&buf[i * kPageSize], i, 1);
    ASSERT_TRUE((*w)->add_pages(kBase, buf.data(), 32).ok());
    // Three rounds each rewrite pages inside what the previous cut left.
    const uint64_t rewritten[3] = {5, 17, 9};
    uint64_t version[32];
    for (uint64_t& v : version) v = 1;
    for (int round = 0; round < 3; ++round) {
      const uint64_t pg = rewritten[round];
      Status st = (*w)->drop_pages({{kBase + pg * kPageSize, kBase + (pg + 1) * kPageSize}}, false);
      ASSERT_TRUE(st.ok()) << st.error().message;
      version[pg] = uint64_t(round) + 2;
      fill_compressible(buf.data(), pg, version[pg]);
      ASSERT_TRUE((*w)->add_pages(kBase + pg * kPageSize, buf.data(), 1).ok());
    }
    // The final round: pages 28..31 were unmapped.
    Status st = (*w)->drop_pages({{kBase, kBase + 28 * kPageSize}}, true);
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ((*w)->pages(), 28u);
    ASSERT_TRUE((*w)->commit(ckpt::testing::make_meta(1, chain)).ok());
    expect_pages(tmp.path(), 28, [&](uint64_t pg) { return version[pg]; });
  }
}

}  // namespace
}  // namespace ckpt::image
