// Private directories held by a lock (migrate/staging): what a killed tool
// leaves is removed by the next one, what a live one holds is not, and a
// planted link is never followed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "migrate/staging.hpp"

using namespace ckpt;
using namespace ckpt::migrate;

namespace {

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

struct Base {
  std::string dir;
  Base() {
    char tmpl[] = "/tmp/ckpt-staging-test-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~Base() { (void)std::system(("rm -rf '" + dir + "'").c_str()); }
};

constexpr const char* kPrefix = "unit-";

}  // namespace

TEST(MigrateStaging, HeldDirectoriesStayDeadOnesGo) {
  Base base;
  auto mine = make_locked_dir(base.dir, kPrefix);
  ASSERT_TRUE(mine.ok()) << mine.error().message;
  std::ofstream(mine->dir + "/pages.img") << "content";
  // A tool that dies with its directory: its lock closes with it.
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  pid_t child = ::fork();
  if (child == 0) {
    auto d = make_locked_dir(base.dir, kPrefix);
    if (!d.ok()) ::_exit(1);
    std::ofstream(d->dir + "/pages.img") << "left behind";
    (void)::write(pipefd[1], d->dir.c_str(), d->dir.size());
    ::_exit(0);  // killed: no cleanup
  }
  ::close(pipefd[1]);
  char buf[512] = {};
  ASSERT_GT(::read(pipefd[0], buf, sizeof buf - 1), 0);
  ::close(pipefd[0]);
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  const std::string dead = buf;
  ASSERT_TRUE(exists(dead + "/pages.img"));

  remove_stale_locked_dirs(base.dir, kPrefix);
  EXPECT_FALSE(exists(dead)) << "a dead tool's directory stayed";
  EXPECT_FALSE(exists(dead + ".lock"));
  EXPECT_TRUE(exists(mine->dir + "/pages.img")) << "a held directory was removed";
  remove_staging(*mine);
  EXPECT_FALSE(exists(mine->dir));
}

TEST(MigrateStaging, APlantedLinkIsNotFollowed) {
  Base base, victim;
  std::ofstream(victim.dir + "/precious") << "keep me";
  const std::string name = base.dir + "/" + kPrefix + "1-planted";
  std::ofstream(name + ".lock") << "";  // a free lock
  ASSERT_EQ(::symlink(victim.dir.c_str(), name.c_str()), 0);
  remove_stale_locked_dirs(base.dir, kPrefix);
  EXPECT_TRUE(exists(victim.dir + "/precious")) << "the stale sweep followed a planted link";
}
