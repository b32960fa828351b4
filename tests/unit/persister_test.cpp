// image::Persister: pages.img made durable in steps while it is written; an
// fdatasync error reaches the caller (the kernel reports a writeback error
// to each open file once, so the final fsync would not see it again).
#include "image/persister.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "image_test_util.hpp"

namespace ckpt::image {
namespace {

TEST(Persister, SyncsInStepsAndStopsClean) {
  ckpt::testing::TempDir tmp;
  const std::string path = tmp.path() + "/f";
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  Persister p(fd, 0, 1 << 20, 2 << 20, path);
  std::vector<char> chunk(1 << 20, 'x');
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_EQ(::write(fd, chunk.data(), chunk.size()), ssize_t(chunk.size()));
    p.written(i << 20);
  }
  Status s = p.stop();
  EXPECT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(p.stop().ok()) << "a second stop is harmless";
  ::close(fd);
}

// Writeback only (no steps), and content that shrank (dropped pages of a
// live checkpoint): nothing to report, and the thread ends.
TEST(Persister, WritebackOnlyAndShrinkingContent) {
  ckpt::testing::TempDir tmp;
  const std::string path = tmp.path() + "/f";
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  Persister p(fd, 4096, 1 << 20, 0, path);
  std::vector<char> chunk(3 << 20, 'x');
  ASSERT_EQ(::write(fd, chunk.data(), chunk.size()), ssize_t(chunk.size()));
  p.written(3 << 20);
  p.written(1 << 20);
  p.written(2 << 20);
  EXPECT_TRUE(p.stop().ok());
  ::close(fd);
}

TEST(Persister, AnFdatasyncErrorReachesStop) {
  // A pipe cannot be synced (EINVAL): the error a disk would report instead.
  int pfd[2];
  ASSERT_EQ(::pipe(pfd), 0);
  Persister p(pfd[1], 0, 4096, 4096, "the-file");
  p.written(8192);
  Status s = p.stop();  // a step that is due is synced before the thread ends
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("fdatasync the-file"), std::string::npos) << s.error().message;
  ::close(pfd[0]);
  ::close(pfd[1]);
}

}  // namespace
}  // namespace ckpt::image
