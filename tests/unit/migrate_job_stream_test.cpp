// The receiving side of a job's generations (migrate/job_stream): only
// files of the image's own layout, in order, and a generation that opens as
// a job; and a real job generation sent and received byte for byte.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "migrate/job_stream.hpp"
#include "migrate/protocol.hpp"

using namespace ckpt;
using namespace ckpt::migrate;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/ckpt-jobstream-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { (void)std::system(("rm -rf " + path).c_str()); }
};

std::vector<uint8_t> u64(uint64_t x) {
  std::vector<uint8_t> v;
  put_u64(v, x);
  return v;
}

std::vector<uint8_t> file_payload(const std::string& rel, uint64_t off, const std::string& data) {
  std::vector<uint8_t> p;
  put_u32(p, uint32_t(rel.size()));
  p.insert(p.end(), rel.begin(), rel.end());
  put_u64(p, off);
  p.insert(p.end(), data.begin(), data.end());
  return p;
}

Status feed(JobIncoming& in, uint32_t type, const std::vector<uint8_t>& p, uint64_t* done) {
  Frame f;
  f.type = type;
  f.data = p.data();
  f.len = p.size();
  return in.on_frame(f, done);
}

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

}  // namespace

TEST(JobStream, RefusesPathsOutsideTheGenerationLayout) {
  TempDir d;
  JobIncoming in(d.path, 3);
  uint64_t done = 0;
  EXPECT_FALSE(feed(in, kJobBegin, u64(2), &done).ok());  // not the first generation asked for
  ASSERT_TRUE(feed(in, kJobBegin, u64(3), &done).ok());
  // A name of its own for the escape two levels up (another process may own /tmp/x).
  const std::string escape = "ckpt-escape-" + std::to_string(::getpid());
  const std::string up = d.path.substr(0, d.path.rfind('/')) + "/" + escape;
  for (const std::string& bad :
       {std::string("../evil"), std::string("/etc/passwd"), "member-12/../../" + escape,
        std::string("member-/meta.img"), std::string("member-1x/meta.img"),
        std::string("other/meta.img"), std::string(".hidden"), std::string("a/b/c"),
        std::string("member-5/.meta.img"), std::string("member-5/")}) {
    EXPECT_FALSE(feed(in, kJobFile, file_payload(bad, 0, "x"), &done).ok()) << bad;
  }
  EXPECT_FALSE(exists(d.path + "/evil"));
  EXPECT_FALSE(exists(up));
  EXPECT_TRUE(feed(in, kJobFile, file_payload("member-12/meta.img", 0, "abc"), &done).ok());
  // Not contiguous, and a file that does not start at 0.
  EXPECT_FALSE(feed(in, kJobFile, file_payload("member-12/meta.img", 5, "x"), &done).ok());
  EXPECT_FALSE(feed(in, kJobFile, file_payload("pages.img", 4096, "x"), &done).ok());
  EXPECT_TRUE(feed(in, kJobFile, file_payload("member-12/meta.img", 3, "de"), &done).ok());
  std::ifstream f(d.path + "/.tmp-job-3/member-12/meta.img");
  std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, "abcde");
  // JOB_END of another generation; then of this one, which does not open as a job.
  EXPECT_FALSE(feed(in, kJobEnd, u64(4), &done).ok());
  EXPECT_FALSE(feed(in, kJobEnd, u64(3), &done).ok());
  EXPECT_EQ(done, 0u);
}

TEST(JobStream, UnfinishedGenerationIsRemoved) {
  TempDir d;
  {
    JobIncoming in(d.path, 1);
    uint64_t done = 0;
    ASSERT_TRUE(feed(in, kJobBegin, u64(1), &done).ok());
    ASSERT_TRUE(feed(in, kJobFile, file_payload("job.img", 0, "partial"), &done).ok());
    EXPECT_TRUE(exists(d.path + "/.tmp-job-1/job.img"));
  }
  EXPECT_FALSE(exists(d.path + "/.tmp-job-1"));
}

// A generation whose files do not open as a job is refused at JOB_END and
// never appears under its name (a partner's store serves what is there).
TEST(JobStream, GenerationThatDoesNotCheckOutNeverAppears) {
  TempDir d;
  {
    JobIncoming in(d.path, 1);
    uint64_t done = 0;
    ASSERT_TRUE(feed(in, kJobBegin, u64(1), &done).ok());
    ASSERT_TRUE(feed(in, kJobFile, file_payload("job.img", 0, "not a job image"), &done).ok());
    EXPECT_FALSE(feed(in, kJobEnd, u64(1), &done).ok());
    EXPECT_EQ(done, 0u);
    EXPECT_FALSE(exists(d.path + "/gen-000001"));
  }
  EXPECT_FALSE(exists(d.path + "/gen-000001"));
  EXPECT_FALSE(exists(d.path + "/.tmp-job-1"));
}

TEST(JobStream, FramesOfAJobAreKnownToTheReader) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  FrameWriter w(sv[0]);
  auto p = file_payload("member-7/pages.img", 0, std::string(5000, 'z'));
  ASSERT_TRUE(w.send(kJobFile, p.data(), p.size()).ok());
  FrameReader r(sv[1]);
  auto f = r.next();
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->type, uint32_t(kJobFile));
  EXPECT_EQ(f->len, p.size());
  EXPECT_STREQ(frame_name(kJobEnd), "JOB_END");
  ::close(sv[0]);
  ::close(sv[1]);
}
