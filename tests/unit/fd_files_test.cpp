// Restore side of file descriptors, in this process (no restored process
// needed): the changed-file check and what prepare_files builds from File
// records (deleted files, pipes, eventfds, timerfds, dups, FIFOs).
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/timerfd.h>

#include "image_test_util.hpp"
#include "restore/files.hpp"

namespace ckpt::restore {
namespace {

using ckpt::testing::TempDir;
using image::FileKind;
using image::FileRecord;
using image::ImageMeta;

int64_t mtime_of(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// A File record of `path` as a checkpoint would have taken it now.
FileRecord regular(int fd, const std::string& path, uint32_t flags) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  FileRecord f;
  f.fd = fd;
  f.kind = FileKind::kRegular;
  f.flags = flags;
  f.path = path;
  f.dev = st.st_dev;
  f.ino = st.st_ino;
  f.size = uint64_t(st.st_size);
  f.mtime_ns = mtime_of(st);
  return f;
}

void write_file(const std::string& path, const std::string& text) {
  std::vector<uint8_t> b(text.begin(), text.end());
  if (::access(path.c_str(), F_OK) == 0)
    ckpt::testing::write_bytes(path, b);
  else
    ckpt::testing::write_bytes_new(path, b);
}

void set_mtime(const std::string& path, time_t sec) {
  timespec t[2] = {{sec, 0}, {sec, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0);
}

TEST(fd_files, UnchangedFilesPass) {
  TempDir tmp;
  const std::string a = tmp.path() + "/a";
  write_file(a, "hello");
  ImageMeta m;
  m.files = {regular(3, a, O_RDONLY), regular(4, a, O_RDWR)};
  EXPECT_TRUE(check_files_unchanged(m, false).ok());
}

TEST(fd_files, ReadOnlyFileWithNewMtimeIsRefusedUnlessForced) {
  TempDir tmp;
  const std::string a = tmp.path() + "/a";
  write_file(a, "hello");
  set_mtime(a, 1000000000);
  ImageMeta m;
  m.files = {regular(5, a, O_RDONLY)};
  set_mtime(a, 1000000001);
  Status st = check_files_unchanged(m, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "fd 5: " + a +
                                    ": changed on disk since the checkpoint: modified (mtime "
                                    "differs, same size); use --force to restore anyway");
  EXPECT_TRUE(check_files_unchanged(m, true).ok());
}

TEST(fd_files, WrittenFileMayGrowButNotShrink) {
  TempDir tmp;
  const std::string a = tmp.path() + "/a";
  write_file(a, "0123456789");
  ImageMeta m;
  m.files = {regular(3, a, O_WRONLY)};
  write_file(a, "0123456789 and more");
  EXPECT_TRUE(check_files_unchanged(m, false).ok());
  write_file(a, "01234");
  ASSERT_EQ(::truncate(a.c_str(), 5), 0);
  Status st = check_files_unchanged(m, false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("size now 5 bytes, was 10"), std::string::npos)
      << st.error().message;
  // A read-only open of the same file makes no difference: the file is written.
  m.files.push_back(regular(4, a, O_RDONLY));
  m.files[1].size = 10;
  EXPECT_FALSE(check_files_unchanged(m, false).ok());
}

TEST(fd_files, ReplacedFileIsRefusedEvenWithSameSizeAndMtime) {
  TempDir tmp;
  const std::string a = tmp.path() + "/a", b = tmp.path() + "/b";
  write_file(a, "same");
  write_file(b, "same");
  set_mtime(a, 1500000000);
  set_mtime(b, 1500000000);
  ImageMeta m;
  m.files = {regular(3, a, O_RDONLY)};
  ASSERT_EQ(::rename(b.c_str(), a.c_str()), 0);
  Status st = check_files_unchanged(m, false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("replaced by another file"), std::string::npos);
  // On another device (another node), the inode is not compared.
  m.files[0].dev ^= 1;
  EXPECT_TRUE(check_files_unchanged(m, false).ok());
}

TEST(fd_files, MappedFilesAreCheckedAndNamed) {
  TempDir tmp;
  const std::string a = tmp.path() + "/lib.so";
  write_file(a, "code");
  FileRecord f = regular(0, a, O_RDONLY);
  image::VmaRecord v;
  v.start = 0x400000;
  v.end = 0x401000;
  v.flags = image::kVmaFile;
  v.prot = 5;
  v.name = a;
  v.dev = f.dev;
  v.ino = f.ino;
  v.file_size = f.size + 1;
  v.mtime_ns = f.mtime_ns;
  ImageMeta m;
  m.vmas = {v};
  Status st = check_files_unchanged(m, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message.rfind("mapping 0x400000-0x401000: " + a + ": changed on disk", 0),
            0u)
      << st.error().message;
  EXPECT_TRUE(check_files_unchanged(m, true).ok());
}

const PreparedFile& prepared(const PreparedFiles& p, int target) {
  for (const PreparedFile& f : p.fds)
    if (f.target == target) return f;
  ADD_FAILURE() << "no prepared fd " << target;
  return p.fds.front();
}

TEST(fd_files, DeletedFileIsRecreatedUnlinkedWithContentAndOffsets) {
  TempDir tmp;
  FileRecord f;
  f.fd = 7;
  f.kind = FileKind::kDeleted;
  f.flags = O_RDWR;
  f.offset = 3;
  f.dev = 1;
  f.ino = 99;
  f.path = tmp.path() + "/gone";
  f.params = {0640, ::getuid(), ::getgid()};
  f.data = {'a', 'b', 'c', 'd', 'e', 'f'};
  FileRecord g = f;  // a second open of the same deleted file
  g.fd = 8;
  g.flags = O_RDONLY;
  g.offset = 1;
  g.data.clear();
  FileRecord d = f;  // a dup of the first
  d.fd = 9;
  d.dup_of = 7;
  d.data.clear();
  ImageMeta m;
  m.files = {g, f, d};  // the content is on the second record: still found
  PreparedFiles p;
  Status st = prepare_files(m, &p);
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_NE(::access(f.path.c_str(), F_OK), 0) << "the name must not exist";
  const int a = prepared(p, 7).source, b = prepared(p, 8).source, c = prepared(p, 9).source;
  struct stat sa, sb;
  ASSERT_EQ(::fstat(a, &sa), 0);
  ASSERT_EQ(::fstat(b, &sb), 0);
  EXPECT_EQ(sa.st_nlink, 0u);
  EXPECT_EQ(sa.st_ino, sb.st_ino);
  EXPECT_EQ(sa.st_size, 6);
  EXPECT_EQ(sa.st_mode & 07777, 0640u);
  EXPECT_EQ(::lseek(a, 0, SEEK_CUR), 3);
  EXPECT_EQ(::lseek(b, 0, SEEK_CUR), 1);
  EXPECT_EQ(c, a) << "a dup shares the source of the fd it duplicates";
  EXPECT_EQ(::fcntl(b, F_GETFL) & O_ACCMODE, O_RDONLY);
  char buf[4] = {};
  EXPECT_EQ(::read(a, buf, 3), 3);
  EXPECT_STREQ(buf, "def");
}

TEST(fd_files, DeletedFileWhoseNameIsTakenBecomesAnUnnamedFile) {
  TempDir tmp;
  const std::string name = tmp.path() + "/taken";
  write_file(name, "someone else's file");
  FileRecord f;
  f.fd = 3;
  f.kind = FileKind::kDeleted;
  f.flags = O_RDONLY;
  f.path = name;
  f.data = {'o', 'l', 'd'};
  ImageMeta m;
  m.files = {f};
  PreparedFiles p;
  Status st = prepare_files(m, &p);
  ASSERT_TRUE(st.ok()) << st.error().message;
  struct stat st_fd, st_name;
  ASSERT_EQ(::fstat(prepared(p, 3).source, &st_fd), 0);
  ASSERT_EQ(::stat(name.c_str(), &st_name), 0);
  EXPECT_EQ(st_fd.st_nlink, 0u);
  EXPECT_NE(st_fd.st_ino, st_name.st_ino);
  EXPECT_EQ(st_fd.st_size, 3);
  EXPECT_EQ(st_name.st_size, 19) << "the file now at the name is left alone";
}

TEST(fd_files, PipeIsRefilledAndItsEndsPaired) {
  FileRecord r;
  r.fd = 10;
  r.kind = FileKind::kPipe;
  r.flags = O_RDONLY | O_NONBLOCK;
  r.ino = 4242;
  r.path = "pipe:[4242]";
  r.params = {131072};
  r.data = {'u', 'n', 'r', 'e', 'a', 'd'};
  FileRecord w = r;
  w.fd = 11;
  w.flags = O_WRONLY;
  w.data.clear();
  FileRecord other = r;  // another pipe, only its read end held, empty
  other.fd = 12;
  other.ino = 4343;
  other.data.clear();
  ImageMeta m;
  m.files = {w, r, other};
  PreparedFiles p;
  Status st = prepare_files(m, &p);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const int rd = prepared(p, 10).source, wr = prepared(p, 11).source;
  EXPECT_EQ(::fcntl(rd, F_GETPIPE_SZ), 131072);
  EXPECT_TRUE(::fcntl(rd, F_GETFL) & O_NONBLOCK);
  EXPECT_FALSE(::fcntl(wr, F_GETFL) & O_NONBLOCK);
  ASSERT_EQ(::write(wr, "!", 1), 1);
  char buf[16] = {};
  EXPECT_EQ(::read(rd, buf, sizeof buf), 7);
  EXPECT_STREQ(buf, "unread!");
  EXPECT_NE(prepared(p, 12).source, rd);
}

TEST(fd_files, EventfdAndTimerfdGetTheirState) {
  FileRecord e;
  e.fd = 3;
  e.kind = FileKind::kEventfd;
  e.flags = O_RDWR | O_NONBLOCK;
  e.params = {0x500000000ull, 0};
  FileRecord t;
  t.fd = 4;
  t.kind = FileKind::kTimerfd;
  t.flags = O_RDWR | O_NONBLOCK;
  t.params = {CLOCK_MONOTONIC, 0, 0, 250000000, 5, 0};  // periodic, expired, 5 unread
  FileRecord s;
  s.fd = 5;
  s.kind = FileKind::kTimerfd;
  s.params = {CLOCK_MONOTONIC, 0, 7000000000ull, 0, 0, 0};  // 7 s left, one-shot
  ImageMeta m;
  m.files = {e, t, s};
  PreparedFiles p;
  Status st = prepare_files(m, &p);
  ASSERT_TRUE(st.ok()) << st.error().message;
  uint64_t v = 0;
  ASSERT_EQ(::read(prepared(p, 3).source, &v, 8), 8);
  EXPECT_EQ(v, 0x500000000ull);
  itimerspec its{};
  ASSERT_EQ(::timerfd_gettime(prepared(p, 4).source, &its), 0);
  EXPECT_EQ(its.it_interval.tv_nsec, 250000000);
  EXPECT_GT(its.it_value.tv_nsec + its.it_value.tv_sec, 0) << "a periodic timer stays armed";
  ASSERT_EQ(::read(prepared(p, 4).source, &v, 8), 8);
  EXPECT_EQ(v, 5u);
  ASSERT_EQ(::timerfd_gettime(prepared(p, 5).source, &its), 0);
  EXPECT_EQ(its.it_value.tv_sec, 6);
  EXPECT_EQ(its.it_interval.tv_sec, 0);
}

TEST(fd_files, EpollOfAMissingFdAndUnknownKindsAreRefused) {
  FileRecord ep;
  ep.fd = 3;
  ep.kind = FileKind::kEpoll;
  ep.params = {9, 1, 0x77};
  ImageMeta m;
  m.files = {ep};
  PreparedFiles p;
  Status st = prepare_files(m, &p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "fd 3: epoll watches fd 9, which is not in the image");
  ASSERT_EQ(p.epoll.size(), 1u);

  FileRecord odd;
  odd.fd = 4;
  odd.kind = FileKind(99);
  odd.path = "x";
  m.files = {odd};
  PreparedFiles q;
  st = prepare_files(m, &q);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "fd 4: x: unknown file kind in image");
}

}  // namespace
}  // namespace ckpt::restore
