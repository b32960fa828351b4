// restore::restore_scratch: a job's tmpfs files put back before its members
// open them; what exists must be the kind and owner saved.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "restore/scratch.hpp"

using namespace ckpt;

namespace {

image::ScratchFile entry(const std::string& path, uint32_t type, uint32_t mode,
                         const std::string& data = "") {
  image::ScratchFile f;
  f.path = path;
  f.type = type;
  f.mode = mode;
  f.uid = ::geteuid();
  f.gid = ::getegid();
  f.data.assign(data.begin(), data.end());
  return f;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ScratchRestore : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/dev/shm/ckpt-scratch-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // A session directory as Open MPI makes one: a directory, a file, a FIFO.
  image::ImageMeta session() const {
    image::ImageMeta m;
    m.scratch.push_back(entry(root_ + "/ompi.vm.0", S_IFDIR, 0700));
    m.scratch.push_back(entry(root_ + "/ompi.vm.0/jf.1", S_IFDIR, 0700));
    m.scratch.push_back(entry(root_ + "/ompi.vm.0/jf.1/contact", S_IFREG, 0600, "tcp://x\n"));
    m.scratch.push_back(entry(root_ + "/ompi.vm.0/jf.1/fifo", S_IFIFO, 0600));
    return m;
  }

  std::string root_;
};

}  // namespace

TEST_F(ScratchRestore, PutsBackDirectoriesFilesAndFifos) {
  const image::ImageMeta m = session();
  ASSERT_TRUE(restore::restore_scratch({&m}).ok());
  struct stat st;
  ASSERT_EQ(::lstat((root_ + "/ompi.vm.0/jf.1/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(file_text(root_ + "/ompi.vm.0/jf.1/contact"), "tcp://x\n");
  // Again over what exists: the file gets its saved content back.
  { std::ofstream(root_ + "/ompi.vm.0/jf.1/contact") << "changed since"; }
  ASSERT_TRUE(restore::restore_scratch({&m}).ok());
  EXPECT_EQ(file_text(root_ + "/ompi.vm.0/jf.1/contact"), "tcp://x\n");
}

// Two nodes' parts of one job restored on one host share its tmpfs: each
// finds, or makes meanwhile, what the other makes. Neither may fail.
TEST_F(ScratchRestore, TwoRestoresOfTheSameTreeAtOnceBothSucceed) {
  const image::ImageMeta m = session();
  for (int round = 0; round < 300; ++round) {
    Status a, b;
    std::thread other([&] { b = restore::restore_scratch({&m}); });
    a = restore::restore_scratch({&m});
    other.join();
    ASSERT_TRUE(a.ok()) << "round " << round << ": " << a.error().message;
    ASSERT_TRUE(b.ok()) << "round " << round << ": " << b.error().message;
    ASSERT_EQ(file_text(root_ + "/ompi.vm.0/jf.1/contact"), "tcp://x\n");
    std::filesystem::remove_all(root_ + "/ompi.vm.0");
  }
}

TEST_F(ScratchRestore, NeverWritesThroughALinkOrAnotherKind) {
  { std::ofstream(root_ + "/victim") << "keep"; }
  ASSERT_EQ(::symlink((root_ + "/victim").c_str(), (root_ + "/contact").c_str()), 0);
  ASSERT_EQ(::mkdir((root_ + "/fifo").c_str(), 0700), 0);
  image::ImageMeta link;
  link.scratch.push_back(entry(root_ + "/contact", S_IFREG, 0600, "overwritten"));
  auto r = restore::restore_scratch({&link});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("exists here as another file or owner"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(file_text(root_ + "/victim"), "keep");
  image::ImageMeta kind;
  kind.scratch.push_back(entry(root_ + "/fifo", S_IFIFO, 0600));
  EXPECT_FALSE(restore::restore_scratch({&kind}).ok());
}

TEST_F(ScratchRestore, NeverWritesIntoAnotherOwnersFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another owner";
  const std::string path = root_ + "/contact";
  { std::ofstream(path) << "theirs"; }
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  image::ImageMeta m;
  m.scratch.push_back(entry(path, S_IFREG, 0600, "ours"));
  auto r = restore::restore_scratch({&m});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EEXIST);
  EXPECT_EQ(file_text(path), "theirs");
}

// Files of a temporary directory on disk: written only below a directory
// the image names as their base, made where missing; a file that holds the
// saved content already is left as it is; one too large to save is not made.
class ScratchOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/var/tmp/ckpt-scratch-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    struct statfs fs;
    ASSERT_EQ(::statfs(root_.c_str(), &fs), 0);
    if (fs.f_type == TMPFS_MAGIC) GTEST_SKIP() << "/var/tmp is on tmpfs here: no disk to test";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(ScratchOnDisk, WritesOnlyBelowATemporaryDirectoryTheImageNames) {
  image::ImageMeta m;
  m.scratch.push_back(entry(root_ + "/sess", S_IFDIR, 0750));
  m.scratch.push_back(entry(root_ + "/sess/data", S_IFREG, 0640, "saved"));
  auto r = restore::restore_scratch({&m});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not on tmpfs here"), std::string::npos) << r.error().message;
  image::ScratchFile base = entry(root_, S_IFDIR, 0700);
  base.flags = image::kScratchBase;
  m.scratch.insert(m.scratch.begin(), base);
  ASSERT_TRUE(restore::restore_scratch({&m}).ok());
  EXPECT_EQ(file_text(root_ + "/sess/data"), "saved");
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/sess").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(ScratchOnDisk, LeavesAFileWithTheSavedContentAlone) {
  image::ScratchFile base = entry(root_, S_IFDIR, 0700);
  base.flags = image::kScratchBase;
  image::ImageMeta m;
  m.scratch = {base, entry(root_ + "/same", S_IFREG, 0600, "content"),
               entry(root_ + "/other", S_IFREG, 0600, "content")};
  { std::ofstream(root_ + "/same") << "content"; }
  { std::ofstream(root_ + "/other") << "changed"; }
  ::chmod((root_ + "/same").c_str(), 0600);
  ::chmod((root_ + "/other").c_str(), 0600);
  timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root_ + "/same").c_str(), old, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, (root_ + "/other").c_str(), old, 0), 0);
  ASSERT_TRUE(restore::restore_scratch({&m}).ok());
  struct stat same, other;
  ASSERT_EQ(::stat((root_ + "/same").c_str(), &same), 0);
  ASSERT_EQ(::stat((root_ + "/other").c_str(), &other), 0);
  EXPECT_EQ(same.st_mtim.tv_sec, 1000000000);   // not written
  EXPECT_NE(other.st_mtim.tv_sec, 1000000000);  // written back
  EXPECT_EQ(file_text(root_ + "/other"), "content");
}

TEST_F(ScratchOnDisk, AFileTooLargeToSaveIsNotMade) {
  image::ScratchFile base = entry(root_, S_IFDIR, 0700);
  base.flags = image::kScratchBase;
  image::ScratchFile big = entry(root_ + "/big", S_IFREG, 0600);
  big.flags = image::kScratchNotSaved;
  big.file_size = 1 << 30;
  image::ImageMeta m;
  m.scratch = {base, big};
  ASSERT_TRUE(restore::restore_scratch({&m}).ok());
  EXPECT_FALSE(std::filesystem::exists(root_ + "/big"));
  EXPECT_EQ(restore::scratch_paths(m).count(root_ + "/big"), 0u);  // checked by path instead
  ASSERT_NE(restore::not_saved(m, root_ + "/big"), nullptr);
}
