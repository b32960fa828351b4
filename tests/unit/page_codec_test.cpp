// Compressed page runs (image/page_codec, docs/format.md "Compressed runs"):
// the codec round-trips, damaged or truncated frames are refused, and a
// generation written with compression reads back byte for byte, with a
// damaged frame in pages.img refused as a checksum error.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>

#include "image/format.hpp"
#include "image/page_codec.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "image_test_util.hpp"

namespace ckpt::image {
namespace {

using ckpt::testing::AlignedBytes;
using ckpt::testing::TempDir;

// Doubles of a smooth field, as a stencil code's arrays hold them.
void fill_field(uint8_t* p, size_t bytes, double phase) {
  auto* d = reinterpret_cast<double*>(p);
  for (size_t i = 0; i < bytes / sizeof(double); ++i)
    d[i] = std::round(1000.0 * std::sin(phase + double(i) * 1e-3)) / 1000.0;
}

void fill_random(uint8_t* p, size_t bytes, uint64_t seed) {
  std::mt19937_64 g(seed);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t v = g();
    std::memcpy(p + i, &v, 8);
  }
}

TEST(PageCodec, RoundTripAndIncompressibleStaysPlain) {
  constexpr size_t kLen = kMaxRunPages * kPageSize;
  AlignedBytes field(kLen), noise(kLen), out(RunCompressor::bound(kLen) * 2);
  fill_field(field.data(), kLen, 0.5);
  fill_random(noise.data(), kLen, 7);
  RunCompressor c(kDefaultCompressLevel, 2);
  std::vector<RunCompressor::Job> jobs(2);
  jobs[0] = {field.data(), kLen, out.data(), 0};
  jobs[1] = {noise.data(), kLen, out.data() + RunCompressor::bound(kLen), 0};
  c.run(jobs);
  ASSERT_GT(jobs[0].stored_pages, 0u);
  EXPECT_LT(jobs[0].stored_pages, kMaxRunPages / 2);
  EXPECT_EQ(jobs[1].stored_pages, 0u);  // random bytes: not a page saved

  std::vector<uint8_t> back(kLen);
  const size_t stored = jobs[0].stored_pages * kPageSize;
  EXPECT_EQ(decompress_run(out.data(), stored, back.data(), kLen), "");
  EXPECT_EQ(std::memcmp(back.data(), field.data(), kLen), 0);
  // A frame that declares another size than the run's is refused.
  EXPECT_NE(decompress_run(out.data(), stored, back.data(), kLen - kPageSize), "");
}

TEST(PageCodec, DamagedOrTruncatedFrameRefused) {
  constexpr size_t kLen = 64 * kPageSize;
  AlignedBytes field(kLen), out(RunCompressor::bound(kLen));
  fill_field(field.data(), kLen, 1.5);
  RunCompressor c(3, 1);
  std::vector<RunCompressor::Job> jobs{{field.data(), kLen, out.data(), 0}};
  c.run(jobs);
  ASSERT_GT(jobs[0].stored_pages, 0u);
  const size_t stored = jobs[0].stored_pages * kPageSize;
  const size_t frame = ZSTD_findFrameCompressedSize(out.data(), stored);
  ASSERT_FALSE(ZSTD_isError(frame));
  std::vector<uint8_t> back(kLen);

  // Truncated: the frame's last bytes missing.
  std::vector<uint8_t> cut(out.data(), out.data() + frame - 3);
  EXPECT_NE(decompress_run(cut.data(), cut.size(), back.data(), kLen), "");
  // Garbage after the frame in its padding.
  if (frame < stored) {
    std::vector<uint8_t> pad(out.data(), out.data() + stored);
    pad[stored - 1] = 1;
    EXPECT_EQ(decompress_run(pad.data(), pad.size(), back.data(), kLen),
              "non-zero bytes after the zstd frame");
  }
  // Every single damaged byte of the frame: refused, or decoded to other
  // bytes than the run's (which the content hash catches).
  size_t refused = 0, differ = 0;
  for (size_t at = 0; at < frame; at += std::max<size_t>(1, frame / 200)) {
    std::vector<uint8_t> bad(out.data(), out.data() + stored);
    bad[at] ^= 0x5a;
    std::string why = decompress_run(bad.data(), bad.size(), back.data(), kLen);
    if (!why.empty())
      ++refused;
    else if (std::memcmp(back.data(), field.data(), kLen) != 0)
      ++differ;
    else
      ADD_FAILURE() << "damaged byte " << at << " decoded to the original";
  }
  EXPECT_GT(refused, 0u);
}

// One generation: compressible, incompressible and zero pages.
struct Written {
  TempDir tmp;
  AlignedBytes data{600 * kPageSize};
  uint64_t vaddr = 0x7f0000000000;
  std::string gen;
};

void write_generation(Written& w, int level) {
  // One run of random pages (256: a whole run), 200 smooth, 100 zero, 44 smooth.
  fill_random(w.data.data(), 256 * kPageSize, 3);
  fill_field(w.data.data() + 256 * kPageSize, 200 * kPageSize, 0.25);
  fill_field(w.data.data() + 556 * kPageSize, 44 * kPageSize, 2.0);
  const auto chain = ckpt::testing::make_chain_id(5);
  auto sw = SnapshotWriter::create(w.tmp.path(), 1, chain);
  ASSERT_TRUE(sw.ok()) << sw.error().message;
  (*sw)->set_compression(level, 2);
  ASSERT_TRUE((*sw)->add_pages(w.vaddr, w.data.data(), 600).ok());
  Status st = (*sw)->commit(ckpt::testing::make_meta(1, chain));
  ASSERT_TRUE(st.ok()) << st.error().message;
  w.gen = generation_dir(w.tmp.path(), 1);
}

TEST(PageCodec, CompressedGenerationReadsBackByteForByte) {
  Written w;
  write_generation(w, kDefaultCompressLevel);
  auto r = SnapshotReader::open(w.gen);
  ASSERT_TRUE(r.ok()) << r.error().message;
  size_t compressed = 0, plain = 0, zero = 0;
  for (const PageRun& run : (*r)->runs()) {
    if (run.zero()) {
      ++zero;
      continue;
    }
    run.compressed() ? ++compressed : ++plain;
    if (run.compressed()) {
      EXPECT_EQ((*r)->content(run), nullptr);  // not verified yet
    }
    Status v = (*r)->verify_run(run);
    ASSERT_TRUE(v.ok()) << v.error().message;
    ASSERT_NE((*r)->content(run), nullptr);
    EXPECT_EQ(std::memcmp((*r)->content(run), w.data.data() + (run.vaddr - w.vaddr), run.bytes()),
              0)
        << "run at " << std::hex << run.vaddr;
  }
  EXPECT_EQ(compressed, 2u);  // the smooth pages
  EXPECT_EQ(plain, 1u);       // the random ones
  EXPECT_EQ(zero, 1u);
  EXPECT_LT((*r)->content_bytes(), (256 + 100) * kPageSize);
  EXPECT_TRUE((*r)->verify_all().ok());
  // Old readers refuse it: the addr.img header announces compressed runs.
  std::vector<uint8_t> addr = ckpt::testing::read_bytes(w.gen + "/" + kAddrFile);
  uint64_t flags;
  std::memcpy(&flags, addr.data() + 48, 8);
  EXPECT_EQ(flags, kAddrHasZstdRuns);
}

TEST(PageCodec, DamagedCompressedRunRefusedAtVerify) {
  Written w;
  write_generation(w, kDefaultCompressLevel);
  const std::string pages = w.gen + "/" + kPagesFile;
  PageRun target;
  {
    auto r = SnapshotReader::open(w.gen);
    ASSERT_TRUE(r.ok());
    for (const PageRun& run : (*r)->runs())
      if (run.compressed()) target = run;
    ASSERT_TRUE(target.compressed());
  }
  // A byte in the middle of the frame, then the frame's first byte (its magic).
  for (uint64_t at : {target.stored_bytes() / 3, uint64_t(0)}) {
    std::vector<uint8_t> b = ckpt::testing::read_bytes(pages);
    b[kPagesHeaderSize + target.content_offset + at] ^= 0x21;
    ckpt::testing::write_bytes(pages, b);
    auto r = SnapshotReader::open(w.gen);  // open reads no content
    ASSERT_TRUE(r.ok()) << r.error().message;
    Status v = (*r)->verify_run(target);
    ASSERT_FALSE(v.ok()) << "damaged byte at " << at;
    EXPECT_EQ(v.error().code, EBADMSG);
    EXPECT_NE(v.error().message.find("content checksum mismatch"), std::string::npos)
        << v.error().message;
    EXPECT_EQ((*r)->content(target), nullptr);
    EXPECT_FALSE((*r)->verify_all().ok());
    b[kPagesHeaderSize + target.content_offset + at] ^= 0x21;
    ckpt::testing::write_bytes(pages, b);
  }
  // A well-formed frame of other content in its place: decodes, and only the
  // content hash can tell.
  {
    AlignedBytes other(target.bytes()), frame(RunCompressor::bound(target.bytes()));
    std::memset(other.data(), 0x11, other.size());
    RunCompressor c(1, 1);
    std::vector<RunCompressor::Job> jobs{{other.data(), other.size(), frame.data(), 0}};
    c.run(jobs);
    ASSERT_GT(jobs[0].stored_pages, 0u);
    ASSERT_LE(jobs[0].stored_pages, target.stored_pages());
    std::vector<uint8_t> b = ckpt::testing::read_bytes(pages);
    const std::vector<uint8_t> orig = b;
    std::memset(&b[kPagesHeaderSize + target.content_offset], 0, target.stored_bytes());
    std::memcpy(&b[kPagesHeaderSize + target.content_offset], frame.data(),
                jobs[0].stored_pages * kPageSize);
    ckpt::testing::write_bytes(pages, b);
    auto r = SnapshotReader::open(w.gen);
    ASSERT_TRUE(r.ok()) << r.error().message;
    Status v = (*r)->verify_run(target);
    ASSERT_FALSE(v.ok()) << "a frame of other content was accepted";
    EXPECT_NE(v.error().message.find("content checksum mismatch"), std::string::npos);
    EXPECT_EQ((*r)->content(target), nullptr);
    ckpt::testing::write_bytes(pages, orig);
  }
  auto r = SnapshotReader::open(w.gen);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->verify_all().ok());  // restored: good again
}

TEST(PageCodec, LevelZeroWritesPlainRuns) {
  Written w;
  write_generation(w, 0);
  auto r = SnapshotReader::open(w.gen);
  ASSERT_TRUE(r.ok());
  for (const PageRun& run : (*r)->runs()) EXPECT_FALSE(run.compressed());
  EXPECT_EQ((*r)->content_bytes(), 500 * kPageSize);
}

}  // namespace
}  // namespace ckpt::image
