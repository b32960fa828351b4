// dump::collect_scratch: the files a process does not hold in its
// temporary directories on disk are saved while they last; one another
// process removes in the meantime is passed over, never a failed checkpoint.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "dump/scratch.hpp"

using namespace ckpt;
namespace fs = std::filesystem;

namespace {

constexpr long kTmpfsMagic = 0x01021994;

// A process started with TMPDIR=dir, sleeping until killed.
pid_t start_sleeper(const std::string& dir) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("TMPDIR", dir.c_str(), 1);
    ::execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

class ScratchCollect : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/var/tmp/scratch-collect.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    struct statfs st;
    ASSERT_EQ(::statfs(dir_.c_str(), &st), 0);
    if (long(st.f_type) == kTmpfsMagic) GTEST_SKIP() << "/var/tmp is tmpfs here: no unheld files";
    // Files count only if changed since the process started (whole seconds).
    pid_ = start_sleeper(dir_);
    ASSERT_GT(pid_, 0);
    ::sleep(1);
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void make_files(int n, const std::string& prefix) {
    for (int i = 0; i < n; ++i) std::ofstream(dir_ + "/" + prefix + std::to_string(i)) << i;
  }
  image::ImageMeta meta() const {
    image::ImageMeta m;
    m.process.pid = pid_;
    m.process.cwd = "/";
    return m;
  }
  std::string dir_;
  pid_t pid_ = -1;
};

TEST_F(ScratchCollect, UnheldFilesAreSaved) {
  make_files(3, "cc");
  image::ImageMeta m = meta();
  ASSERT_TRUE(dump::collect_scratch(pid_, &m, nullptr, 64ull << 20).ok());
  int files = 0;
  for (const image::ScratchFile& f : m.scratch)
    if (f.path.rfind(dir_ + "/cc", 0) == 0) {
      ++files;
      EXPECT_TRUE(f.flags & image::kScratchIfMissing) << f.path;
      EXPECT_EQ(std::string(f.data.begin(), f.data.end()), f.path.substr(f.path.size() - 1));
    }
  EXPECT_EQ(files, 3);
}

// Another process (a compiler beside the job) makes and removes files in the
// same directory while the checkpoint reads it: many rounds, so that files
// listed and gone before they are read occur.
TEST_F(ScratchCollect, FilesRemovedMeanwhileArePassedOver) {
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    for (unsigned round = 0; !stop; ++round) {
      const std::string p = dir_ + "/churn" + std::to_string(round % 512);
      std::ofstream(p) << "x";
      ::unlink(p.c_str());
    }
  });
  int gone = 0;
  for (int round = 0; round < 200; ++round) {
    make_files(200, "tmp" + std::to_string(round) + "-");
    std::thread remove([&, round] {
      for (int i = 199; i >= 0; --i)
        ::unlink((dir_ + "/tmp" + std::to_string(round) + "-" + std::to_string(i)).c_str());
    });
    image::ImageMeta m = meta();
    Status s = dump::collect_scratch(pid_, &m, nullptr, 64ull << 20);
    remove.join();
    ASSERT_TRUE(s.ok()) << s.error().message;
    int saved = 0;
    for (const image::ScratchFile& f : m.scratch)
      saved += f.path.find("/tmp" + std::to_string(round) + "-") != std::string::npos;
    gone += saved < 200;
  }
  stop = true;
  churn.join();
  // The race was met (else the test proved nothing about it).
  EXPECT_GT(gone, 0);
}

}  // namespace
