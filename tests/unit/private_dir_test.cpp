// Where the tools write outside a checkpoint directory (the tracking ledger)
// and the checkpoint directory itself: another user's directory, one that
// others may write into, or a planted symbolic link is refused, and a link
// planted where the next ledger record goes is never followed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "dirty/ledger.hpp"
#include "image/store.hpp"
#include "image_test_util.hpp"
#include "util/fd.hpp"
#include "util/private_dir.hpp"

namespace ckpt {
namespace {

using ckpt::testing::TempDir;

constexpr uid_t kVictim = 65534;    // nobody
constexpr uid_t kAttacker = 65533;  // another unprivileged user

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Field 22 of /proc/self/stat.
std::string own_start_time() {
  std::string s = slurp("/proc/self/stat");
  const char* p = s.c_str() + s.rfind(')') + 1;
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
  }
  while (*p == ' ') ++p;
  return std::string(p, std::strcspn(p, " "));
}

// Runs f() in a child as the victim with XDG_RUNTIME_DIR=runtime; returns
// its exit code (f's result), or -1.
int as_victim(const std::string& runtime, int (*f)()) {
  pid_t c = ::fork();
  if (c == 0) {
    ::setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
    if (::setresgid(kVictim, kVictim, kVictim) != 0 || ::setresuid(kVictim, kVictim, kVictim) != 0)
      ::_exit(99);
    ::_exit(f());
  }
  int st = 0;
  if (::waitpid(c, &st, 0) != c || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

int write_own_record() {
  dirty::LedgerEntry e;
  e.chain_id[0] = 0xab;
  e.generation = 7;
  Status s = dirty::write_ledger(::getpid(), e);
  if (!s.ok()) return s.error().code == EPERM ? 10 : 11;
  auto back = dirty::read_ledger(::getpid());
  return back && *back == e ? 0 : 12;
}

class PrivateDir : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as two users";
    ASSERT_EQ(::chmod(tmp_.path().c_str(), 0755), 0);
  }
  TempDir tmp_;
};

TEST_F(PrivateDir, LedgerWorksInTheUsersOwnRuntimeDirectory) {
  const std::string rt = tmp_.path() + "/run-victim";
  ASSERT_EQ(::mkdir(rt.c_str(), 0700), 0);
  ASSERT_EQ(::chown(rt.c_str(), kVictim, kVictim), 0);
  EXPECT_EQ(as_victim(rt, write_own_record), 0);
  struct stat st;
  ASSERT_EQ(::stat((rt + "/libckpt/tracking").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kVictim);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// The attack of issue 13: another user pre-creates the ledger directory and
// plants a link named like the victim's next record, pointing at a file of
// the victim's. The victim's tool must refuse the directory and leave the
// file alone.
TEST_F(PrivateDir, PlantedLedgerDirectoryAndSymlinkAreRefused) {
  const std::string rt = tmp_.path() + "/run-shared";
  ASSERT_EQ(::mkdir(rt.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(rt.c_str(), 01777), 0);
  const std::string victim_file = tmp_.path() + "/precious";
  { std::ofstream(victim_file) << "precious data\n"; }
  ASSERT_EQ(::chown(victim_file.c_str(), kVictim, kVictim), 0);
  // The attacker's directory tree, writable by everybody.
  for (const std::string& d : {rt + "/libckpt", rt + "/libckpt/tracking"}) {
    ASSERT_EQ(::mkdir(d.c_str(), 0777), 0);
    ASSERT_EQ(::chmod(d.c_str(), 0777), 0);
    ASSERT_EQ(::chown(d.c_str(), kAttacker, kAttacker), 0);
  }
  // The record's name is PID-STARTTIME-PIDNS, which an attacker can predict; here
  // the child tells it through a pipe, and the links are planted before it
  // writes.
  int p[2], q[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_EQ(::pipe(q), 0);
  pid_t c = ::fork();
  if (c == 0) {
    ::setenv("XDG_RUNTIME_DIR", rt.c_str(), 1);
    struct stat ns;
    if (::stat("/proc/self/ns/pid", &ns) != 0) ::_exit(97);
    auto boot = dirty::boot_id();
    if (!boot) ::_exit(96);
    std::string tag;
    for (char ch : *boot)
      if (tag.size() < 8 && ch != '-') tag += ch;
    std::string name = std::to_string(::getpid()) + "-" + own_start_time() + "-" +
                       std::to_string(ns.st_ino) + "-" + tag;
    (void)!::write(p[1], name.data(), name.size());
    ::close(p[1]);
    char go;
    if (::read(q[0], &go, 1) != 1) ::_exit(98);
    if (::setresgid(kVictim, kVictim, kVictim) != 0 || ::setresuid(kVictim, kVictim, kVictim) != 0)
      ::_exit(99);
    ::_exit(write_own_record());
  }
  ::close(p[1]);
  ::close(q[0]);
  char buf[64] = {};
  ASSERT_GT(::read(p[0], buf, sizeof buf - 1), 0);
  const std::string entry = rt + "/libckpt/tracking/" + buf;
  // The temporary name is the record's and the writing thread's (the child's only one).
  ASSERT_EQ(::symlink(victim_file.c_str(), (entry + ".tmp." + std::to_string(c)).c_str()), 0);
  ASSERT_EQ(::symlink(victim_file.c_str(), entry.c_str()), 0);
  ASSERT_EQ(::write(q[1], "g", 1), 1);
  int st = 0;
  ASSERT_EQ(::waitpid(c, &st, 0), c);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 10) << "the planted directory was not refused with EPERM";
  EXPECT_EQ(slurp(victim_file), "precious data\n") << "the link was followed";
  ::close(p[0]);
  ::close(q[1]);
}

TEST_F(PrivateDir, OwnerModeAndLinksAreChecked) {
  const std::string base = tmp_.path();
  // Others may write: refused.
  ASSERT_EQ(::mkdir((base + "/open").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((base + "/open").c_str(), 0770), 0);
  Status s = make_private_dirs(base, base + "/open/x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, EPERM);
  EXPECT_NE(s.error().message.find("writable by other users"), std::string::npos);
  // Another user's: refused.
  ASSERT_EQ(::mkdir((base + "/theirs").c_str(), 0700), 0);
  ASSERT_EQ(::chown((base + "/theirs").c_str(), kAttacker, kAttacker), 0);
  s = check_private_dir(base + "/theirs");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("belongs to uid"), std::string::npos);
  // A symbolic link as a component: refused, even to a good directory.
  ASSERT_EQ(::mkdir((base + "/good").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((base + "/good").c_str(), (base + "/link").c_str()), 0);
  s = make_private_dirs(base, base + "/link/x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("symbolic link"), std::string::npos);
  EXPECT_TRUE(make_private_dirs(base, base + "/good/x/y").ok());
  // A checkpoint directory others may write into is refused too.
  s = image::ensure_dir(base + "/open");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, EPERM);
  EXPECT_TRUE(image::ensure_dir(base + "/good/ck").ok());
}

}  // namespace
}  // namespace ckpt
