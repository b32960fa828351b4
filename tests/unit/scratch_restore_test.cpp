// restore::restore_scratch: a job's tmpfs files put back before its members
// open them; what exists must be the kind and owner saved.
#include <gtest/gtest.h>
#include <sys/stat.h>
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
