// File locks and signal owners: their place in the File record, and what
// the kernel's "lock:" lines say of locks this process really takes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "image/format.hpp"
#include "proc/file_locks.hpp"
#include "util/fd.hpp"
#include "util/hash.hpp"

using namespace ckpt;
using image::FileLock;
using image::LockKind;

namespace {

image::ImageMeta with_file(const image::FileRecord& f) {
  image::ImageMeta m;
  m.generation = 1;
  m.files.push_back(f);
  return m;
}

}  // namespace

TEST(FileLocks, LocksAndOwnerRoundTrip) {
  image::FileRecord f;
  f.fd = 4;
  f.path = "/tmp/x.db";
  f.locks = {{LockKind::kPosix, F_WRLCK, 0x40000001, 0x40000001, 1234},
             {LockKind::kOfd, F_RDLCK, 10, image::kLockToEof, -1},
             {LockKind::kFlock, F_WRLCK, 0, image::kLockToEof, 99}};
  f.owner = {F_OWNER_TID, 1235, 35};
  uint64_t n = 0;
  std::vector<uint8_t> rec = image::encode_meta(with_file(f), &n);
  image::ImageMeta back;
  std::string err;
  ASSERT_TRUE(image::decode_meta(rec.data(), rec.size(), n, &back, &err)) << err;
  ASSERT_EQ(back.files.size(), 1u);
  const image::FileRecord& b = back.files[0];
  ASSERT_EQ(b.locks.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b.locks[i].kind, f.locks[i].kind);
    EXPECT_EQ(b.locks[i].type, f.locks[i].type);
    EXPECT_EQ(b.locks[i].start, f.locks[i].start);
    EXPECT_EQ(b.locks[i].end, f.locks[i].end);
    EXPECT_EQ(b.locks[i].pid, f.locks[i].pid);
  }
  EXPECT_EQ(b.owner.type, F_OWNER_TID);
  EXPECT_EQ(b.owner.pid, 1235);
  EXPECT_EQ(b.owner.signo, 35);
  EXPECT_EQ(b.dup_of, -1);
}

// format.md: 4 + 28 per lock + 12 bytes after the first appended block,
// which a plain file without them does not write at all.
TEST(FileLocks, SecondBlockIsLaidOutAsDocumented) {
  image::FileRecord plain;
  plain.fd = 3;
  plain.path = "/a";
  uint64_t n = 0;
  const size_t base = image::encode_meta(with_file(plain), &n).size();
  image::FileRecord locked = plain;
  locked.locks.push_back({LockKind::kFlock, F_RDLCK, 0, image::kLockToEof, 7});
  const size_t first_block = 4 + 4 + 4;  // dup_of, params count, data length
  EXPECT_EQ(image::encode_meta(with_file(locked), &n).size(), base + first_block + 4 + 28 + 12);
}

TEST(FileLocks, TruncatedSecondBlockIsMalformed) {
  image::FileRecord f;
  f.fd = 3;
  f.path = "/a";
  f.owner = {F_OWNER_PID, 42, 0};
  uint64_t n = 0;
  std::vector<uint8_t> rec = image::encode_meta(with_file(f), &n);
  // Cut the File record's last 4 payload bytes (signo) and fix its length
  // and checksum as a writer would have: the block must be all or nothing.
  // Each record: type u32, len u32, payload, xxh3 u64 of type, len, payload.
  std::vector<uint8_t> cut;
  for (size_t off = 0; off < rec.size();) {
    uint32_t type, len;
    std::memcpy(&type, rec.data() + off, 4);
    std::memcpy(&len, rec.data() + off + 4, 4);
    const size_t at = cut.size();
    const uint32_t keep = type == uint32_t(image::RecordType::kFile) ? len - 4 : len;
    cut.insert(cut.end(), rec.begin() + long(off), rec.begin() + long(off + 8 + keep));
    std::memcpy(cut.data() + at + 4, &keep, 4);
    const uint64_t h = xxh3(cut.data() + at, 8 + keep);
    cut.resize(cut.size() + 8);
    std::memcpy(cut.data() + cut.size() - 8, &h, 8);
    off += 16 + len;
  }
  image::ImageMeta back;
  std::string err;
  EXPECT_FALSE(image::decode_meta(cut.data(), cut.size(), n, &back, &err));
  EXPECT_NE(err.find("malformed"), std::string::npos) << err;
}

TEST(FileLocks, ParsesTheKernelsLines) {
  proc::LockLine l;
  ASSERT_TRUE(proc::parse_lock_line("\t1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 0 99", &l));
  EXPECT_EQ(l.kind, "POSIX");
  EXPECT_EQ(l.type, "WRITE");
  EXPECT_EQ(l.pid, 1234);
  EXPECT_EQ(l.major, 0xfdu);
  EXPECT_EQ(l.minor, 1u);
  EXPECT_EQ(l.ino, 5678u);
  EXPECT_EQ(l.start, 0u);
  EXPECT_EQ(l.end, 99u);
  EXPECT_FALSE(l.waiting);
  ASSERT_TRUE(proc::parse_lock_line("2: FLOCK  ADVISORY  READ 77 00:2f:12 0 EOF", &l));
  EXPECT_EQ(l.kind, "FLOCK");
  EXPECT_EQ(l.end, image::kLockToEof);
  ASSERT_TRUE(proc::parse_lock_line("3: OFDLCK ADVISORY  READ -1 08:02:9 10 19", &l));
  EXPECT_EQ(l.pid, -1);
  ASSERT_TRUE(proc::parse_lock_line("4: -> POSIX  ADVISORY  WRITE 88 08:02:9 0 EOF", &l));
  EXPECT_TRUE(l.waiting);
  EXPECT_FALSE(proc::parse_lock_line("pos:\t0", &l));
  EXPECT_FALSE(proc::parse_lock_line("1: POSIX ADVISORY", &l));
}

// The three kinds taken for real: fdinfo lists each with its range, and
// /proc/locks shows the conflicts a restore would run into.
TEST(FileLocks, FdinfoListsTheLocksThisProcessTakes) {
  char tmpl[] = "/tmp/ckpt-locks-test.XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  UniqueFd posix(fd), flk(::open(tmpl, O_RDWR)), ofd(::open(tmpl, O_RDWR));
  ::unlink(tmpl);
  ASSERT_EQ(::ftruncate(posix.get(), 4096), 0);
  struct flock w {};
  w.l_type = F_WRLCK;
  w.l_start = 0;
  w.l_len = 100;
  ASSERT_EQ(::fcntl(posix.get(), F_SETLK, &w), 0);
  struct flock r {};
  r.l_type = F_RDLCK;
  r.l_start = 1000;
  r.l_len = 0;
  ASSERT_EQ(::fcntl(ofd.get(), F_OFD_SETLK, &r), 0);
  ASSERT_EQ(::flock(flk.get(), LOCK_EX), 0);

  auto info = [](int n) {
    auto t = read_file("/proc/self/fdinfo/" + std::to_string(n));
    return t.ok() ? *t : std::string();
  };
  auto p = proc::fdinfo_locks(info(posix.get()));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].kind, "POSIX");
  EXPECT_EQ(p[0].type, "WRITE");
  EXPECT_EQ(p[0].pid, ::getpid());
  EXPECT_EQ(p[0].end, 99u);
  auto o = proc::fdinfo_locks(info(ofd.get()));
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].kind, "OFDLCK");
  EXPECT_EQ(o[0].start, 1000u);
  EXPECT_EQ(o[0].end, image::kLockToEof);
  auto f = proc::fdinfo_locks(info(flk.get()));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, "FLOCK");

  struct stat st;
  ASSERT_EQ(::fstat(posix.get(), &st), 0);
  auto c = proc::conflicting_lock(st.st_dev, st.st_ino, {LockKind::kPosix, F_RDLCK, 50, 60, 0});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->pid, ::getpid());
  EXPECT_FALSE(
      proc::conflicting_lock(st.st_dev, st.st_ino, {LockKind::kOfd, F_RDLCK, 100, 200, 0}));
  EXPECT_TRUE(
      proc::conflicting_lock(st.st_dev, st.st_ino, {LockKind::kOfd, F_WRLCK, 2000, 2000, 0}));
  EXPECT_TRUE(proc::conflicting_lock(st.st_dev, st.st_ino, {LockKind::kFlock, F_RDLCK, 0, 0, 0}));
}
