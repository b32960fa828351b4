// The hash-linked chain (format version 2, record 22): a generation directory
// that is renamed, swapped with another, or replaced by a sibling taken on
// another parent is refused by restore (open_chain) and by cr_info --verify
// (verify_chains), naming the directory; a missing parent is a failure.
#include <gtest/gtest.h>

#include <cstdio>

#include "image/chain.hpp"
#include "image/chain_verify.hpp"
#include "image/format.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "image_test_util.hpp"
#include "util/hash.hpp"

namespace ckpt::image {
namespace {

using ckpt::testing::AlignedBytes;
using ckpt::testing::TempDir;

// Writes generation `gen` of `chain` on `parent_digest` (0: a full) with one
// page whose bytes depend on `salt`; returns its meta.img digest.
uint64_t write_gen(const std::string& dir, uint64_t gen, const std::array<uint8_t, 16>& chain,
                   uint64_t parent_digest, uint64_t salt) {
  ImageMeta m = ckpt::testing::make_meta(gen, chain, 64);
  m.parent_generation = gen - 1;
  m.link.parent_digest = parent_digest;
  AlignedBytes page(kPageSize);
  ckpt::testing::fill_page(page.data(), gen * 1000 + salt);
  auto w = SnapshotWriter::create(dir, gen, chain);
  EXPECT_TRUE(w.ok());
  if (!w.ok()) return 0;
  EXPECT_TRUE((*w)->add_pages(0x10000 + gen * kPageSize, page.data(), 1).ok());
  Status st = (*w)->commit(m);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return (*w)->meta_digest();
}

class ChainLink : public ::testing::Test {
 protected:
  void SetUp() override {
    chain_ = ckpt::testing::make_chain_id(50);
    uint64_t d = write_gen(tmp_.path(), 1, chain_, 0, 0);
    d = write_gen(tmp_.path(), 2, chain_, d, 0);
    write_gen(tmp_.path(), 3, chain_, d, 0);
  }
  std::string gen(uint64_t g) const { return generation_dir(tmp_.path(), g); }
  Status verify() const {
    auto gens = list_generations(tmp_.path());
    EXPECT_TRUE(gens.ok());
    return verify_chains(tmp_.path(), *gens, 0);
  }
  TempDir tmp_;
  std::array<uint8_t, 16> chain_{};
};

TEST_F(ChainLink, IntactChainOpensAndVerifies) {
  auto c = open_chain(tmp_.path(), 3);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->links.size(), 3u);
  EXPECT_EQ(c->links[0]->meta().link.parent_digest, c->links[1]->meta_digest());
  EXPECT_TRUE(verify().ok());
}

TEST_F(ChainLink, SwappedDirectoriesAreRefusedNamingTheDirectory) {
  const std::string tmp = tmp_.path() + "/swap";
  ASSERT_EQ(std::rename(gen(1).c_str(), tmp.c_str()), 0);
  ASSERT_EQ(std::rename(gen(2).c_str(), gen(1).c_str()), 0);
  ASSERT_EQ(std::rename(tmp.c_str(), gen(2).c_str()), 0);
  auto c = open_chain(tmp_.path(), 3);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, EBADMSG);
  EXPECT_NE(c.error().message.find(gen(2)), std::string::npos) << c.error().message;
  Status v = verify();
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("gen-00000"), std::string::npos) << v.error().message;
}

// Same chain, same generation number, same directory name: only the digest
// tells that generation 3 was taken on another generation 2.
TEST_F(ChainLink, SiblingGenerationIsRefusedByItsDigest) {
  TempDir other;
  uint64_t d = write_gen(other.path(), 1, chain_, 0, 0);
  d = write_gen(other.path(), 2, chain_, d, 9);  // another generation 2
  write_gen(other.path(), 3, chain_, d, 0);
  // Generation 3 taken on that other generation 2 replaces this one's.
  const std::string g3 = gen(3);
  for (const char* f : {kPagesFile, kAddrFile, kMetaFile})
    ASSERT_EQ(::unlink((g3 + "/" + f).c_str()), 0);
  ASSERT_EQ(::rmdir(g3.c_str()), 0);
  ASSERT_EQ(std::rename(generation_dir(other.path(), 3).c_str(), g3.c_str()), 0);
  auto c = open_chain(tmp_.path(), 3);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("digest mismatch"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find(g3), std::string::npos) << c.error().message;
  Status v = verify();
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message.find("digest mismatch"), std::string::npos) << v.error().message;
}

TEST_F(ChainLink, MissingParentFailsVerify) {
  for (const char* f : {kPagesFile, kAddrFile, kMetaFile})
    ASSERT_EQ(::unlink((gen(2) + "/" + f).c_str()), 0);
  ASSERT_EQ(::rmdir(gen(2).c_str()), 0);
  Status v = verify();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code, ENOENT);
  EXPECT_NE(v.error().message.find("needs generation 2"), std::string::npos) << v.error().message;
  EXPECT_FALSE(open_chain(tmp_.path(), 3).ok());
}

TEST_F(ChainLink, IncrementalWithoutLinkIsRefused) {
  // A version-2 meta.img whose link record was dropped: rewrite generation 3
  // by hand without record 22 (count and header hash fixed up).
  std::vector<uint8_t> meta = ckpt::testing::read_bytes(gen(3) + "/meta.img");
  uint64_t count;
  std::memcpy(&count, &meta[40], 8);
  size_t off = 64, last = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t len;
    std::memcpy(&len, &meta[off + 4], 4);
    last = off;
    off += 16 + len;
  }
  uint32_t type;
  std::memcpy(&type, &meta[last], 4);
  ASSERT_EQ(type, 22u);
  meta.resize(last);
  --count;
  std::memcpy(&meta[40], &count, 8);
  std::memset(&meta[56], 0, 8);
  uint64_t h = ckpt::xxh3(meta.data(), 64);
  std::memcpy(&meta[56], &h, 8);
  ckpt::testing::write_bytes(gen(3) + "/meta.img", meta);
  auto r = SnapshotReader::open(gen(3));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no chain link"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace ckpt::image
