// An inotify instance's watches, read from fdinfo (notify/inotify_dump),
// through the image record and back (inotify_record), set again on a new
// instance under the same watch descriptors (inotify_restore); a record
// that does not hold together is refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image_test_util.hpp"
#include "notify/inotify.hpp"

using namespace ckpt;
using ckpt::testing::TempDir;

namespace {

std::string fdinfo(int fd) {
  auto t = read_file("/proc/self/fdinfo/" + std::to_string(fd));
  return t.ok() ? *t : "";
}

void make_file(const std::string& p) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0) << p;
  ::close(fd);
}

ino_t ino_of(const std::string& p) {
  struct stat st {};
  ::lstat(p.c_str(), &st);
  return st.st_ino;
}

}  // namespace

TEST(InotifyWatches, ReadStoredAndSetAgainUnderTheirDescriptors) {
  TempDir dir;
  const std::string a = dir.path() + "/a", b = dir.path() + "/b", gone = dir.path() + "/gone";
  make_file(a);
  make_file(b);
  make_file(gone);
  UniqueFd in(::inotify_init1(IN_NONBLOCK));
  ASSERT_TRUE(in.valid());
  ASSERT_EQ(::inotify_add_watch(in.get(), a.c_str(), IN_MODIFY), 1);
  ASSERT_EQ(::inotify_rm_watch(in.get(), ::inotify_add_watch(in.get(), gone.c_str(), IN_OPEN)), 0);
  ASSERT_EQ(::inotify_add_watch(in.get(), dir.path().c_str(), IN_CREATE | IN_ONESHOT), 3);
  ASSERT_EQ(::inotify_add_watch(in.get(), b.c_str(), IN_CLOSE_WRITE), 4);

  auto watches = notify::read_watches(::getpid(), fdinfo(in.get()), "fd");
  ASSERT_TRUE(watches.ok()) << watches.error().message;
  ASSERT_EQ(watches->size(), 3u);
  EXPECT_EQ((*watches)[0].wd, 1);
  EXPECT_EQ((*watches)[0].path, a);
  EXPECT_EQ((*watches)[0].mask, uint32_t(IN_MODIFY));
  EXPECT_EQ((*watches)[1].wd, 3);
  EXPECT_EQ((*watches)[1].path, dir.path());
  EXPECT_EQ((*watches)[1].mask, uint32_t(IN_CREATE | IN_ONESHOT));
  EXPECT_EQ((*watches)[2].wd, 4);
  EXPECT_EQ((*watches)[2].path, b);

  image::FileRecord f;
  f.kind = image::FileKind::kInotify;
  f.flags = O_NONBLOCK;
  notify::store_watches(*watches, &f);
  auto back = notify::load_watches(f, "fd");
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[2].path, b);

  auto restored = notify::restore_inotify(f, "fd");
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_TRUE(::fcntl(restored->get(), F_GETFL) & O_NONBLOCK);
  // The same descriptors on the same files, and nothing queued.
  auto again = notify::read_watches(::getpid(), fdinfo(restored->get()), "fd");
  ASSERT_TRUE(again.ok()) << again.error().message;
  ASSERT_EQ(again->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*again)[i].wd, (*watches)[i].wd);
    EXPECT_EQ((*again)[i].mask, (*watches)[i].mask);
    EXPECT_EQ(ino_of((*again)[i].path), ino_of((*watches)[i].path));
  }
  char buf[256];
  EXPECT_EQ(::read(restored->get(), buf, sizeof buf), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST(InotifyWatches, ARecordThatDoesNotHoldTogetherIsRefused) {
  auto refused = [](std::vector<uint64_t> params, std::string data) {
    image::FileRecord f;
    f.kind = image::FileKind::kInotify;
    f.params = std::move(params);
    f.data.assign(data.begin(), data.end());
    auto r = notify::load_watches(f, "fd 3");
    return !r.ok() && r.error().code == EBADMSG;
  };
  EXPECT_FALSE(refused({1, IN_MODIFY, 2}, "/a"));
  EXPECT_TRUE(refused({1, IN_MODIFY}, "/a"));     // not whole triples
  EXPECT_TRUE(refused({1, IN_MODIFY, 3}, "/a"));  // past the data
  EXPECT_TRUE(refused({1, IN_MODIFY, 1}, "/a"));  // data left over
  EXPECT_TRUE(refused({0, IN_MODIFY, 2}, "/a"));
  EXPECT_TRUE(
      refused({uint64_t(notify::kMaxWatchDescriptor) + 1, IN_MODIFY, 2}, "/a"));  // no watch 0
  EXPECT_TRUE(refused({1, IN_MODIFY, 2}, "ab"));                                  // not absolute
  EXPECT_TRUE(refused({2, IN_MODIFY, 2, 1, IN_MODIFY, 2}, "/a/b"));               // out of order
  EXPECT_TRUE(refused({1, uint64_t(1) << 40, 2}, "/a"));                          // no such mask
  EXPECT_TRUE(refused({1, IN_MODIFY, 0}, ""));                                    // no path
}
