// A generation written by SnapshotWriter reads back identically through
// SnapshotReader: metadata field by field, page addresses and content byte by
// byte; zero pages cost no content bytes; commit is all-or-nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>

#include "image/format.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "image_test_util.hpp"

namespace ckpt::image {
namespace {

using ckpt::testing::TempDir;

// Pages handed to the writer in one add_pages() call.
struct Segment {
  uint64_t vaddr;
  ckpt::testing::AlignedBytes data;  // npages * kPageSize
  size_t npages() const { return data.size() / kPageSize; }
  bool page_zero(size_t i) const {
    const uint8_t* p = data.data() + i * kPageSize;
    for (size_t k = 0; k < kPageSize; ++k)
      if (p[k]) return false;
    return true;
  }
};

// `kinds`: 'N' a non-zero page, 'Z' an all-zero page.
Segment make_segment(uint64_t vaddr, const std::string& kinds) {
  Segment s{vaddr, ckpt::testing::AlignedBytes(kinds.size() * kPageSize)};
  for (size_t i = 0; i < kinds.size(); ++i)
    if (kinds[i] == 'N') ckpt::testing::fill_page(&s.data[i * kPageSize], vaddr / kPageSize + i);
  return s;
}

std::string repeat(char c, size_t n) {
  return std::string(n, c);
}

struct ExpectedRun {
  uint64_t vaddr;
  uint32_t npages;
  bool zero;
  const uint8_t* src;  // the bytes handed to the writer
};

// The documented splitting rule, restated independently of the writer:
// maximal groups of same-kind pages, at most kMaxRunPages each, per call.
std::vector<ExpectedRun> expected_runs(const std::vector<Segment>& segs) {
  std::vector<ExpectedRun> out;
  for (const Segment& s : segs) {
    size_t i = 0;
    while (i < s.npages()) {
      bool z = s.page_zero(i);
      size_t j = i + 1;
      while (j < s.npages() && j - i < 256 && s.page_zero(j) == z) ++j;
      out.push_back({s.vaddr + i * kPageSize, uint32_t(j - i), z, s.data.data() + i * kPageSize});
      i = j;
    }
  }
  return out;
}

std::vector<Segment> realistic_segments() {
  std::vector<Segment> segs;
  segs.push_back(make_segment(0x555555554000, "NNN"));
  // Heap: runs longer than 256 pages of both kinds, and single-page runs.
  segs.push_back(
      make_segment(0x555555559000, repeat('N', 300) + repeat('Z', 310) + "NZ" + repeat('N', 88)));
  // Pages that are almost zero: one byte set at the end, start or middle.
  Segment tricky = make_segment(0x7ffff7fc4000, "ZZZZ");
  tricky.data[0 * kPageSize + kPageSize - 1] = 0x01;
  tricky.data[1 * kPageSize + 0] = 0x80;
  tricky.data[2 * kPageSize + kPageSize / 2] = 0xff;
  segs.push_back(std::move(tricky));
  segs.push_back(make_segment(0x7ffffffde000, "Z"));
  // Exactly one maximal run of each kind, then exactly two.
  segs.push_back(make_segment(0x7ffff7a00000, repeat('N', 256)));
  segs.push_back(make_segment(0x600000000000, repeat('Z', 512)));
  segs.push_back(make_segment(0x600000400000, repeat('N', 512)));
  return segs;
}

Status write_generation(const std::string& dir, uint64_t gen, const std::array<uint8_t, 16>& chain,
                        const std::vector<Segment>& segs) {
  auto w = SnapshotWriter::create(dir, gen, chain);
  if (!w.ok()) return w.error();
  for (const Segment& s : segs) CKPT_TRY((*w)->add_pages(s.vaddr, s.data.data(), s.npages()));
  return (*w)->commit(ckpt::testing::make_meta(gen, chain));
}

uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ~0ull;
  return uint64_t(st.st_size);
}

TEST(FormatRoundtrip, RealisticGenerationReadsBackIdentically) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(1);
  const ImageMeta meta = ckpt::testing::make_meta(1, chain);
  const std::vector<Segment> segs = realistic_segments();
  const std::vector<ExpectedRun> want = expected_runs(segs);

  uint64_t total_pages = 0, zero_pages = 0;
  for (const Segment& s : segs)
    for (size_t i = 0; i < s.npages(); ++i) {
      ++total_pages;
      zero_pages += s.page_zero(i);
    }
  ASSERT_GT(zero_pages, 512u);
  ASSERT_GT(total_pages - zero_pages, 512u);

  auto w = SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok()) << w.error().message;
  for (const Segment& s : segs) {
    Status st = (*w)->add_pages(s.vaddr, s.data.data(), s.npages());
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  // Until commit, only the temporary directory exists.
  std::vector<std::string> before = ckpt::testing::list_dir(tmp.path());
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].rfind(".tmp-", 0), 0u) << before[0];
  Status st = (*w)->commit(meta);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ((*w)->pages(), total_pages);
  EXPECT_EQ((*w)->zero_pages(), zero_pages);
  EXPECT_EQ((*w)->content_bytes(), (total_pages - zero_pages) * kPageSize);
  const std::vector<PageRun> writer_runs = (*w)->runs();
  const uint64_t bytes_total = (*w)->bytes_total();
  w->reset();  // destroying a committed writer must not touch the generation

  // Exactly the committed generation, no temporary directory.
  EXPECT_EQ(ckpt::testing::list_dir(tmp.path()), std::vector<std::string>{"gen-000001"});
  const std::string gen = generation_dir(tmp.path(), 1);
  EXPECT_EQ(ckpt::testing::list_dir(gen),
            (std::vector<std::string>{"addr.img", "meta.img", "pages.img"}));
  struct stat st_dir;
  ASSERT_EQ(::stat(gen.c_str(), &st_dir), 0);
  EXPECT_EQ(st_dir.st_mode & 077, 0u) << "generation directory is accessible to others";
  uint64_t bytes_on_disk = 0;
  for (const char* f : {"pages.img", "addr.img", "meta.img"}) {
    struct stat fs;
    ASSERT_EQ(::stat((gen + "/" + f).c_str(), &fs), 0) << f;
    EXPECT_TRUE(S_ISREG(fs.st_mode)) << f;
    EXPECT_EQ(fs.st_mode & 07777, 0600u) << f;
    bytes_on_disk += uint64_t(fs.st_size);
  }
  EXPECT_EQ(file_size(gen + "/pages.img"), 4096 + (total_pages - zero_pages) * kPageSize)
      << "zero pages must cost no content bytes";
  EXPECT_EQ(file_size(gen + "/addr.img"), 64 + want.size() * 40);

  auto r = SnapshotReader::open(gen);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const SnapshotReader& rd = **r;
  EXPECT_EQ(rd.path(), gen);
  ckpt::testing::expect_meta_eq(rd.meta(), meta);
  EXPECT_EQ(rd.content_bytes(), (total_pages - zero_pages) * kPageSize);

  // Runs: exactly the expected split, in order, content laid out densely.
  const std::vector<PageRun>& runs = rd.runs();
  ASSERT_EQ(runs.size(), want.size());
  uint64_t next_offset = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    const PageRun& run = runs[i];
    EXPECT_EQ(run.vaddr, want[i].vaddr);
    EXPECT_EQ(run.npages, want[i].npages);
    EXPECT_LE(run.npages, kMaxRunPages);
    EXPECT_EQ(run.zero(), want[i].zero);
    EXPECT_EQ(run.flags & ~uint32_t(kRunZero), 0u);
    if (run.zero()) {
      EXPECT_EQ(run.content_hash, 0u);
      EXPECT_EQ(rd.content(run), nullptr);
    } else {
      EXPECT_EQ(run.content_offset, next_offset);
      EXPECT_EQ(run.content_offset % kPageSize, 0u);
      next_offset += run.bytes();
      const uint8_t* c = rd.content(run);
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % kPageSize, 0u) << "content not page aligned";
      EXPECT_EQ(std::memcmp(c, want[i].src, run.bytes()), 0) << "content differs";
    }
    Status v = rd.verify_run(run);
    EXPECT_TRUE(v.ok()) << v.error().message;
  }
  EXPECT_EQ(next_offset, rd.content_bytes());
  // The writer's view of the runs is the reader's.
  ASSERT_EQ(writer_runs.size(), runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(writer_runs[i].vaddr, runs[i].vaddr);
    EXPECT_EQ(writer_runs[i].npages, runs[i].npages);
    EXPECT_EQ(writer_runs[i].flags, runs[i].flags);
    EXPECT_EQ(writer_runs[i].content_offset, runs[i].content_offset);
    EXPECT_EQ(writer_runs[i].content_hash, runs[i].content_hash);
  }

  // The runs cover exactly the pages given, each once.
  std::set<uint64_t> given, covered;
  for (const Segment& s : segs)
    for (size_t i = 0; i < s.npages(); ++i) given.insert(s.vaddr + i * kPageSize);
  for (const PageRun& run : runs)
    for (uint32_t i = 0; i < run.npages; ++i)
      EXPECT_TRUE(covered.insert(run.vaddr + i * kPageSize).second) << "page listed twice";
  EXPECT_EQ(covered, given);

  Status all = rd.verify_all();
  EXPECT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(bytes_total, bytes_on_disk);
}

TEST(FormatRoundtrip, BytesTotalIsTheSizeOfTheThreeFiles) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(2);
  auto w = SnapshotWriter::create(tmp.path(), 4, chain);
  ASSERT_TRUE(w.ok()) << w.error().message;
  Segment s = make_segment(0x10000, "NNZZNZ");
  ASSERT_TRUE((*w)->add_pages(s.vaddr, s.data.data(), s.npages()).ok());
  Status st = (*w)->commit(ckpt::testing::make_meta(4, chain));
  ASSERT_TRUE(st.ok()) << st.error().message;
  const std::string gen = generation_dir(tmp.path(), 4);
  EXPECT_EQ((*w)->bytes_total(), file_size(gen + "/pages.img") + file_size(gen + "/addr.img") +
                                     file_size(gen + "/meta.img"));
}

// Without O_DIRECT any buffer alignment is accepted. (With O_DIRECT, the
// default, add_pages() needs page-aligned buffers wherever the filesystem
// honours O_DIRECT; the other tests hand in aligned buffers.)
TEST(FormatRoundtrip, BufferedWriterAcceptsUnalignedBuffers) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(12);
  Segment s = make_segment(0x10000, "NZNN");
  std::vector<uint8_t> unaligned(s.data.size() + 1);
  std::memcpy(unaligned.data() + 1, s.data.data(), s.data.size());
  auto w = SnapshotWriter::create(tmp.path(), 1, chain, /*direct_io=*/false);
  ASSERT_TRUE(w.ok()) << w.error().message;
  Status st = (*w)->add_pages(s.vaddr, unaligned.data() + 1, s.npages());
  ASSERT_TRUE(st.ok()) << st.error().message;
  st = (*w)->commit(ckpt::testing::make_meta(1, chain));
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto r = SnapshotReader::open(generation_dir(tmp.path(), 1));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ((*r)->runs().size(), 3u);
  EXPECT_EQ(std::memcmp((*r)->content((*r)->runs()[0]), s.data.data(), kPageSize), 0);
  EXPECT_EQ(
      std::memcmp((*r)->content((*r)->runs()[2]), s.data.data() + 2 * kPageSize, 2 * kPageSize), 0);
  EXPECT_TRUE((*r)->verify_all().ok());
}

TEST(FormatRoundtrip, EmptyGenerationHasOnlyHeaders) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(3);
  auto w = SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok()) << w.error().message;
  Status st = (*w)->commit(ckpt::testing::make_meta(1, chain));
  ASSERT_TRUE(st.ok()) << st.error().message;
  const std::string gen = generation_dir(tmp.path(), 1);
  EXPECT_EQ(file_size(gen + "/pages.img"), 4096u);
  EXPECT_EQ(file_size(gen + "/addr.img"), 64u);
  auto r = SnapshotReader::open(gen);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE((*r)->runs().empty());
  EXPECT_EQ((*r)->content_bytes(), 0u);
  EXPECT_TRUE((*r)->verify_all().ok());
}

TEST(FormatRoundtrip, OnlyZeroPagesCostNoContent) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(4);
  std::vector<Segment> segs{make_segment(0x7f0000000000, repeat('Z', 300))};
  Status st = write_generation(tmp.path(), 1, chain, segs);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const std::string gen = generation_dir(tmp.path(), 1);
  EXPECT_EQ(file_size(gen + "/pages.img"), 4096u);
  auto r = SnapshotReader::open(gen);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ((*r)->runs().size(), 2u);
  EXPECT_EQ((*r)->runs()[0].npages, 256u);
  EXPECT_EQ((*r)->runs()[1].npages, 44u);
  EXPECT_EQ((*r)->runs()[1].vaddr, 0x7f0000000000u + 256 * kPageSize);
  for (const PageRun& run : (*r)->runs()) {
    EXPECT_TRUE(run.zero());
    EXPECT_EQ(run.content_hash, 0u);
  }
  EXPECT_TRUE((*r)->verify_all().ok());
}

TEST(FormatRoundtrip, WriterDestroyedWithoutCommitLeavesNothing) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(5);
  {
    auto w = SnapshotWriter::create(tmp.path(), 1, chain);
    ASSERT_TRUE(w.ok()) << w.error().message;
  }
  EXPECT_TRUE(ckpt::testing::list_dir(tmp.path()).empty());
  {
    auto w = SnapshotWriter::create(tmp.path(), 2, chain);
    ASSERT_TRUE(w.ok()) << w.error().message;
    Segment s = make_segment(0x400000, repeat('N', 300) + "ZZ");
    ASSERT_TRUE((*w)->add_pages(s.vaddr, s.data.data(), s.npages()).ok());
    EXPECT_EQ(ckpt::testing::list_dir(tmp.path()).size(), 1u);  // the temporary directory
  }
  EXPECT_TRUE(ckpt::testing::list_dir(tmp.path()).empty());
  auto gens = list_generations(tmp.path());
  ASSERT_TRUE(gens.ok());
  EXPECT_TRUE(gens->empty());
}

TEST(FormatRoundtrip, CommitRefusesMetadataOfAnotherGeneration) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(6);
  {
    auto w = SnapshotWriter::create(tmp.path(), 3, chain);
    ASSERT_TRUE(w.ok()) << w.error().message;
    Status st = (*w)->commit(ckpt::testing::make_meta(4, chain));
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, EINVAL);
    st = (*w)->commit(ckpt::testing::make_meta(3, ckpt::testing::make_chain_id(7)));
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, EINVAL);
  }
  EXPECT_TRUE(ckpt::testing::list_dir(tmp.path()).empty());
}

TEST(FormatRoundtrip, FailedCommitKeepsTheCommittedGeneration) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(8);
  std::vector<Segment> first{make_segment(0x10000, "NNZN")};
  ASSERT_TRUE(write_generation(tmp.path(), 1, chain, first).ok());
  const std::string gen = generation_dir(tmp.path(), 1);
  const auto pages = ckpt::testing::read_bytes(gen + "/pages.img");
  const auto addr = ckpt::testing::read_bytes(gen + "/addr.img");
  const auto meta = ckpt::testing::read_bytes(gen + "/meta.img");
  {
    // A second writer of the same generation number cannot replace it.
    std::vector<Segment> second{make_segment(0x20000, "ZNN")};
    Status st = write_generation(tmp.path(), 1, chain, second);
    EXPECT_FALSE(st.ok());
  }
  EXPECT_EQ(ckpt::testing::list_dir(tmp.path()), std::vector<std::string>{"gen-000001"});
  EXPECT_EQ(ckpt::testing::read_bytes(gen + "/pages.img"), pages);
  EXPECT_EQ(ckpt::testing::read_bytes(gen + "/addr.img"), addr);
  EXPECT_EQ(ckpt::testing::read_bytes(gen + "/meta.img"), meta);
  auto r = SnapshotReader::open(gen);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE((*r)->verify_all().ok());
}

TEST(FormatRoundtrip, CreateFailsOnMissingDirectory) {
  TempDir tmp;
  auto w = SnapshotWriter::create(tmp.path() + "/no/such/dir", 1, ckpt::testing::make_chain_id(9));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ENOENT);
  EXPECT_NE(w.error().message.find("no/such/dir"), std::string::npos) << w.error().message;
}

TEST(Store, GenerationDirNaming) {
  EXPECT_EQ(generation_dir("/ckpt", 1), "/ckpt/gen-000001");
  EXPECT_EQ(generation_dir("/ckpt", 42), "/ckpt/gen-000042");
  EXPECT_EQ(generation_dir("/a dir/x", 999999), "/a dir/x/gen-999999");
  EXPECT_EQ(generation_dir("/ckpt", 1234567), "/ckpt/gen-1234567");  // wider, never truncated
  EXPECT_EQ(generation_dir("rel", 7), "rel/gen-000007");
}

TEST(Store, ListGenerationsAscendingAndOnlyCommitted) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(10);
  std::vector<Segment> segs{make_segment(0x10000, "NZ")};
  for (uint64_t g : {3, 1, 12, 2, 1000000})
    ASSERT_TRUE(write_generation(tmp.path(), g, chain, segs).ok()) << g;
  // Things that are not committed generations.
  for (const char* d : {".tmp-5-1234", "gen-000000", "gen-7x", "gen-", "gen.000004", "other"})
    ASSERT_EQ(::mkdir((tmp.path() + "/" + d).c_str(), 0700), 0) << d;
  {
    auto w = SnapshotWriter::create(tmp.path(), 13, chain);  // in progress
    ASSERT_TRUE(w.ok());
    auto gens = list_generations(tmp.path());
    ASSERT_TRUE(gens.ok()) << gens.error().message;
    EXPECT_EQ(*gens, (std::vector<uint64_t>{1, 2, 3, 12, 1000000}));
  }
}

// BUG (reported, not fixed here): list_generations() parses names with
// sscanf("gen-%llu"), which also accepts a sign, leading blanks, unpadded and
// overflowing numbers: a stray "gen--1" is listed as generation 2^64 - 1, so
// the newest generation has no directory (restart fails with ENOENT) and the
// next checkpoint would get generation 0. Every listed generation should be
// one whose generation_dir() exists. Enable once fixed.
TEST(Store, ListGenerationsOnlyListsCanonicalNames) {
  TempDir tmp;
  std::vector<Segment> segs{make_segment(0x10000, "N")};
  ASSERT_TRUE(write_generation(tmp.path(), 2, ckpt::testing::make_chain_id(11), segs).ok());
  for (const char* d : {"gen--1", "gen-+5", "gen- 7", "gen-99999999999999999999", "gen-3"})
    ASSERT_EQ(::mkdir((tmp.path() + "/" + d).c_str(), 0700), 0) << d;
  auto gens = list_generations(tmp.path());
  ASSERT_TRUE(gens.ok()) << gens.error().message;
  EXPECT_EQ(*gens, std::vector<uint64_t>{2});
  for (uint64_t g : *gens) {
    struct stat st;
    EXPECT_EQ(::stat(generation_dir(tmp.path(), g).c_str(), &st), 0) << "listed " << g;
  }
}

TEST(Store, RemoveStaleTempsKeepsLiveWritersAndGenerations) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(13);
  std::vector<Segment> segs{make_segment(0x10000, "NZ")};
  ASSERT_TRUE(write_generation(tmp.path(), 1, chain, segs).ok());
  // A PID that certainly does not exist any more: a child that was reaped.
  pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  int ws;
  ASSERT_EQ(::waitpid(dead, &ws, 0), dead);
  const std::string stale =
      tmp.path() + "/.tmp-2-" + ckpt::image::temp_prefix_host() + "-" + std::to_string(dead);
  // Another host's temporary is never judged from here, whatever its PID.
  const std::string other = tmp.path() + "/.tmp-4-otherhost-" + std::to_string(dead);
  ASSERT_EQ(::mkdir(other.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(stale.c_str(), 0700), 0);
  ckpt::testing::write_bytes_new(stale + "/pages.img", std::vector<uint8_t>(8192, 1));
  auto live = SnapshotWriter::create(tmp.path(), 3, chain);  // this process: alive
  ASSERT_TRUE(live.ok());
  remove_stale_temps(tmp.path());
  std::vector<std::string> left = ckpt::testing::list_dir(tmp.path());
  ASSERT_EQ(left.size(), 3u);
  EXPECT_EQ(left[0],
            ".tmp-3-" + ckpt::image::temp_prefix_host() + "-" + std::to_string(::getpid()));
  EXPECT_EQ(left[1], ".tmp-4-otherhost-" + std::to_string(dead));
  EXPECT_EQ(left[2], "gen-000001");
  auto r = SnapshotReader::open(generation_dir(tmp.path(), 1));
  ASSERT_TRUE(r.ok()) << r.error().message;
  // The live writer still commits.
  Status st = (*live)->commit(ckpt::testing::make_meta(3, chain));
  EXPECT_TRUE(st.ok()) << st.error().message;
}

TEST(Store, ListGenerationsOfMissingDirIsAnError) {
  TempDir tmp;
  auto gens = list_generations(tmp.path() + "/missing");
  ASSERT_FALSE(gens.ok());
  EXPECT_EQ(gens.error().code, ENOENT);
  EXPECT_NE(gens.error().message.find("missing"), std::string::npos);
}

TEST(Store, EnsureDirCreatesPrivateDirAndRefusesFiles) {
  TempDir tmp;
  const std::string d = tmp.path() + "/ckpt";
  ASSERT_TRUE(ensure_dir(d).ok());
  ASSERT_TRUE(ensure_dir(d).ok());  // idempotent
  struct stat st;
  ASSERT_EQ(::stat(d.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 077, 0u);
  const std::string f = tmp.path() + "/file";
  FILE* fp = std::fopen(f.c_str(), "w");
  ASSERT_NE(fp, nullptr);
  std::fclose(fp);
  Status s = ensure_dir(f);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ENOTDIR);
}

}  // namespace
}  // namespace ckpt::image
