// Records with empty variable-length fields (a thread without xstate, a
// file record whose data is empty) decode cleanly. Found by fuzz_meta_records
// under UBSan: the decoder copied 0 bytes into an empty vector's null data(),
// which is undefined behaviour; this test fails in the sanitizer build
// (scripts/sanitize.sh) if it comes back.
#include <gtest/gtest.h>

#include "image/format.hpp"

using namespace ckpt::image;

TEST(FormatEmptyFields, EmptyXstateAndFileDataRoundTrip) {
  ImageMeta m;
  m.generation = 1;
  ThreadRecord t;
  t.tid = 42;
  m.threads.push_back(t);  // xstate empty
  FileRecord f;
  f.fd = 3;
  f.path = "x";
  f.dup_of = 0;  // differs from its default: the appended fields are written, data empty
  m.files.push_back(f);
  uint64_t n = 0;
  std::vector<uint8_t> rec = encode_meta(m, &n);
  ImageMeta back;
  std::string err;
  ASSERT_TRUE(decode_meta(rec.data(), rec.size(), n, &back, &err)) << err;
  ASSERT_EQ(back.threads.size(), 1u);
  EXPECT_EQ(back.threads[0].tid, 42);
  EXPECT_TRUE(back.threads[0].xstate.empty());
  ASSERT_EQ(back.files.size(), 1u);
  EXPECT_TRUE(back.files[0].data.empty());
}

// The same for a scratch record without content (a directory, or a file
// another member saved), whose appended flags must come back too.
TEST(FormatEmptyFields, ScratchRecordWithoutContentRoundTrips) {
  ImageMeta m;
  m.generation = 1;
  ScratchFile dir;
  dir.path = "/dev/shm/d";
  dir.type = 0040000;
  m.scratch.push_back(dir);
  ScratchFile elsewhere;
  elsewhere.path = "/dev/shm/d/f";
  elsewhere.type = 0100000;
  elsewhere.flags = kScratchContentElsewhere;
  m.scratch.push_back(elsewhere);
  uint64_t n = 0;
  std::vector<uint8_t> rec = encode_meta(m, &n);
  ImageMeta back;
  std::string err;
  ASSERT_TRUE(decode_meta(rec.data(), rec.size(), n, &back, &err)) << err;
  ASSERT_EQ(back.scratch.size(), 2u);
  EXPECT_TRUE(back.scratch[0].data.empty());
  EXPECT_EQ(back.scratch[0].flags, 0u);
  EXPECT_EQ(back.scratch[1].path, "/dev/shm/d/f");
  EXPECT_EQ(back.scratch[1].flags, uint32_t(kScratchContentElsewhere));
}
