// Credentials (metadata record 23): the record round-trips through the
// metadata codec and an old image (no record) reads as "no credentials";
// the /proc parsers read real text; the privilege rule refuses every claim a
// user could not have had.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "image/credentials_codec.hpp"
#include "image/format.hpp"
#include "proc/credentials.hpp"
#include "proc/task_state.hpp"
#include "restore/credentials.hpp"
#include "restore/image_trust.hpp"
#include "util/fd.hpp"

namespace ckpt {
namespace {

image::TaskCredentials sample(int32_t tid) {
  image::TaskCredentials c;
  c.tid = tid;
  c.flags = image::kCredSecurebitsKnown | image::kCredNoNewPrivs;
  c.uid = {1000, 1001, 1002, 1003};
  c.gid = {2000, 2001, 2002, 2003};
  c.groups = {4, 24, 27};
  c.cap_inheritable = 0x400;
  c.cap_permitted = 0x1ffeffffffULL;
  c.cap_effective = 0x3000;
  c.cap_bounding = 0x1fffffffffULL;
  c.cap_ambient = 0x400;
  c.securebits = 0x3;
  c.sched_policy = 3 | 0x40000000;
  c.sched_priority = 0;
  c.nice = -4;
  c.affinity = {0x5, 0, 0x80};
  return c;
}

void expect_same(const image::TaskCredentials& a, const image::TaskCredentials& b) {
  EXPECT_EQ(a.tid, b.tid);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.gid, b.gid);
  EXPECT_EQ(a.groups, b.groups);
  EXPECT_EQ(a.cap_inheritable, b.cap_inheritable);
  EXPECT_EQ(a.cap_permitted, b.cap_permitted);
  EXPECT_EQ(a.cap_effective, b.cap_effective);
  EXPECT_EQ(a.cap_bounding, b.cap_bounding);
  EXPECT_EQ(a.cap_ambient, b.cap_ambient);
  EXPECT_EQ(a.securebits, b.securebits);
  EXPECT_EQ(a.sched_policy, b.sched_policy);
  EXPECT_EQ(a.sched_priority, b.sched_priority);
  EXPECT_EQ(a.nice, b.nice);
  EXPECT_EQ(a.affinity, b.affinity);
}

image::ImageMeta two_threads() {
  image::ImageMeta m;
  m.generation = 1;
  m.process.pid = 100;
  m.threads.resize(2);
  m.threads[0].tid = 100;
  m.threads[1].tid = 101;
  m.credentials = {sample(100), sample(101)};
  m.credentials[1].uid = {0, 0, 0, 0};
  m.credentials[1].groups.clear();
  m.credentials[1].affinity.clear();
  return m;
}

TEST(Credentials, RecordRoundTrips) {
  image::ImageMeta m = two_threads();
  uint64_t n = 0;
  std::vector<uint8_t> bytes = image::encode_meta(m, &n);
  image::ImageMeta back;
  std::string err;
  ASSERT_TRUE(image::decode_meta(bytes.data(), bytes.size(), n, &back, &err)) << err;
  ASSERT_EQ(back.credentials.size(), 2u);
  expect_same(back.credentials[0], m.credentials[0]);
  expect_same(back.credentials[1], m.credentials[1]);
}

TEST(Credentials, ImageWithoutTheRecordHasNone) {
  image::ImageMeta m = two_threads();
  m.credentials.clear();
  uint64_t n = 0;
  std::vector<uint8_t> bytes = image::encode_meta(m, &n);
  image::ImageMeta back;
  std::string err;
  ASSERT_TRUE(image::decode_meta(bytes.data(), bytes.size(), n, &back, &err)) << err;
  EXPECT_TRUE(back.credentials.empty());
}

TEST(Credentials, TruncatedRecordIsMalformed) {
  image::TaskCredentials c = sample(7);
  image::ByteWriter w;
  image::encode_credentials(c, w);
  for (size_t cut = 0; cut < w.data().size(); cut += 3) {
    image::ByteReader r(w.data().data(), cut);
    image::TaskCredentials out;
    EXPECT_FALSE(image::decode_credentials(r, &out)) << "cut at " << cut;
  }
}

TEST(Credentials, ParsesOwnStatus) {
  auto status = read_file("/proc/self/status");
  ASSERT_TRUE(status.ok());
  image::TaskCredentials c;
  ASSERT_TRUE(proc::parse_status_credentials(*status, &c).ok());
  EXPECT_EQ(c.uid[0], ::getuid());
  EXPECT_EQ(c.uid[1], ::geteuid());
  EXPECT_EQ(c.gid[0], ::getgid());
  EXPECT_EQ(c.groups.size(), size_t(::getgroups(0, nullptr)));
}

TEST(Credentials, ParsesStatusText) {
  const std::string text =
      "Name:\tx\nUid:\t1\t2\t3\t4\nGid:\t5\t6\t7\t8\nGroups:\t9 10 \n"
      "CapInh:\t0000000000000400\nCapPrm:\t00000000000000ff\nCapEff:\t000000000000000f\n"
      "CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000400\nNoNewPrivs:\t1\n";
  image::TaskCredentials c;
  ASSERT_TRUE(proc::parse_status_credentials(text, &c).ok());
  EXPECT_EQ(c.uid, (std::array<uint32_t, 4>{1, 2, 3, 4}));
  EXPECT_EQ(c.gid, (std::array<uint32_t, 4>{5, 6, 7, 8}));
  EXPECT_EQ(c.groups, (std::vector<uint32_t>{9, 10}));
  EXPECT_EQ(c.cap_inheritable, 0x400u);
  EXPECT_EQ(c.cap_permitted, 0xffu);
  EXPECT_EQ(c.cap_effective, 0xfu);
  EXPECT_EQ(c.cap_bounding, 0x1ffffffffffULL);
  EXPECT_EQ(c.cap_ambient, 0x400u);
  EXPECT_TRUE(c.no_new_privs());
}

TEST(Credentials, LimitsFromProcMatchGetrlimit) {
  auto text = read_file("/proc/self/limits");
  ASSERT_TRUE(text.ok());
  std::array<uint64_t, 32> lim{};
  ASSERT_TRUE(proc::parse_limits(*text, &lim).ok());
  for (int r = 0; r < 16; ++r) {
    rlimit64 rl;
    ASSERT_EQ(::prlimit64(0, __rlimit_resource(r), nullptr, &rl), 0);
    EXPECT_EQ(lim[size_t(2 * r)], rl.rlim_cur) << "limit " << r;
    EXPECT_EQ(lim[size_t(2 * r + 1)], rl.rlim_max) << "limit " << r;
  }
}

image::ImageMeta user_meta(uint32_t uid, uint32_t gid) {
  image::ImageMeta m;
  m.threads.resize(1);
  m.threads[0].tid = 50;
  image::TaskCredentials c;
  c.tid = 50;
  c.uid = {uid, uid, uid, uid};
  c.gid = {gid, gid, gid, gid};
  c.groups = {gid};
  c.cap_bounding = ~0ull;
  m.credentials = {c};
  return m;
}

TEST(Credentials, UserImagesFitOnlyTheUser) {
  const std::set<gid_t> groups = {1000, 27};
  EXPECT_TRUE(restore::fits_user(user_meta(1000, 1000), 1000, groups).ok());
  // Each claim a user could not have had is refused.
  EXPECT_FALSE(restore::fits_user(user_meta(0, 1000), 1000, groups).ok());
  image::ImageMeta m = user_meta(1000, 1000);
  m.credentials[0].uid[2] = 0;  // a saved uid of root
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  m = user_meta(1000, 0);
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  m = user_meta(1000, 1000);
  m.credentials[0].groups.push_back(0);
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  m = user_meta(1000, 1000);
  m.credentials[0].cap_ambient = 1;
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  m = user_meta(1000, 1000);
  m.credentials[0].cap_permitted = 1ull << 21;
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  m = user_meta(1000, 1000);
  m.credentials[0].sched_policy = 1;  // SCHED_FIFO
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  m = user_meta(1000, 1000);
  m.credentials[0].nice = -5;
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  // Objects the restore makes with their saved owner.
  image::VmaRecord sysv;
  sysv.flags = image::kVmaShared | image::kVmaSysv;
  sysv.dev = uint64_t(1000) << 32;                  // key 0, gid 1000
  sysv.mtime_ns = int64_t(0600 | (1000ull << 32));  // uid 1000
  m = user_meta(1000, 1000);
  m.vmas.push_back(sysv);
  EXPECT_TRUE(restore::fits_user(m, 1000, groups).ok());
  m.vmas.back().mtime_ns = 0600;  // owned by root
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  m.vmas.back().mtime_ns = int64_t(0600 | (1000ull << 32));
  m.vmas.back().dev = 0;  // group root
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  image::VmaRecord deleted;
  deleted.flags = image::kVmaShared | image::kVmaDelShared;
  deleted.name = "/dev/shm/x (deleted)";
  deleted.mtime_ns = 0600;  // owned by root
  m = user_meta(1000, 1000);
  m.vmas.push_back(deleted);
  EXPECT_FALSE(restore::fits_user(m, 1000, groups).ok());
  m.vmas.back().mtime_ns = int64_t(0600 | (1000ull << 32));
  EXPECT_TRUE(restore::fits_user(m, 1000, groups).ok());
}

TEST(Credentials, UserLimitsAboveTheRestorersAreRefused) {
  image::ImageMeta m = user_meta(1000, 1000);
  m.state.has_rlimits = true;
  for (int r = 0; r < 16; ++r) {
    rlimit64 rl;
    ASSERT_EQ(::prlimit64(0, __rlimit_resource(r), nullptr, &rl), 0);
    m.state.rlimits[size_t(2 * r)] = rl.rlim_cur;
    m.state.rlimits[size_t(2 * r + 1)] = rl.rlim_max;
  }
  EXPECT_TRUE(restore::fits_user(m, 1000, {1000}).ok());
  rlimit64 nofile;
  ASSERT_EQ(::prlimit64(0, RLIMIT_NOFILE, nullptr, &nofile), 0);
  if (nofile.rlim_max == RLIM64_INFINITY) GTEST_SKIP() << "RLIMIT_NOFILE is unlimited here";
  m.state.rlimits[2 * RLIMIT_NOFILE + 1] = nofile.rlim_max + 1;
  EXPECT_FALSE(restore::fits_user(m, 1000, {1000}).ok());
}

// What cr_pause relies on: the live process's credentials against the
// checkpoint's, read from /proc (here: this test process, single-threaded
// only in the main thread's record).
TEST(Credentials, RollbackRefusesChangedCredentials) {
  image::ImageMeta m;
  m.threads.resize(1);
  m.threads[0].tid = ::getpid();
  auto creds = proc::read_credentials(::getpid(), m.threads);
  ASSERT_TRUE(creds.ok()) << creds.error().message;
  m.credentials = *creds;
  EXPECT_EQ(m.credentials[0].uid[0], ::getuid());
  EXPECT_TRUE(restore::check_credentials_unchanged(::getpid(), m).ok());
  m.credentials[0].uid[1] += 1;
  Status st = restore::check_credentials_unchanged(::getpid(), m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("credentials changed"), std::string::npos);
  m.credentials[0].uid[1] -= 1;
  m.credentials[0].cap_bounding ^= 1;
  EXPECT_FALSE(restore::check_credentials_unchanged(::getpid(), m).ok());
}

}  // namespace
}  // namespace ckpt
