// Tracking records (dirty/ledger) name the boot they were written in: /run
// survives a reboot on some machines (where it is on the root disk), and
// the same PID, start time and PID namespace can then name another process.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "dirty/ledger.hpp"

using namespace ckpt::dirty;

namespace {

// The record file names in the ledger directory that start with "PID-".
std::vector<std::string> records_of(const std::string& dir, pid_t pid) {
  std::vector<std::string> out;
  const std::string prefix = std::to_string(pid) + "-";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.push_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

}  // namespace

TEST(LedgerBoot, RecordsOfAnotherBootAreNotThisProcesssAndAreSwept) {
  auto dir = runtime_dir("tracking");
  ASSERT_TRUE(dir.has_value());
  auto boot = boot_id();
  ASSERT_TRUE(boot.has_value());
  pid_t target = ::fork();
  if (target == 0) {
    ::pause();
    ::_exit(0);
  }
  LedgerEntry e{};
  e.chain_id[0] = 0xb0;
  e.generation = 3;
  ASSERT_TRUE(write_ledger(target, e).ok());
  auto names = records_of(*dir, target);
  ASSERT_EQ(names.size(), 1u);
  const std::string mine = names[0];
  // PID-START-PIDNS-BOOT: the boot part is this boot's id, 8 digits.
  const std::string tag = mine.substr(mine.rfind('-') + 1);
  ASSERT_EQ(tag.size(), 8u);
  EXPECT_EQ(boot->substr(0, 8), tag);

  // What an earlier boot (another tag) and an earlier version (no tag) left
  // under the same PID, start time and namespace.
  const std::string stem = mine.substr(0, mine.rfind('-'));
  const std::string other = stem + "-" + (tag == "00000000" ? "11111111" : "00000000");
  for (const std::string& n : {other, stem, other + ".adaptive"})
    std::ofstream(*dir + "/" + n) << "b0000000000000000000000000000000 9\n";
  ::unlink((*dir + "/" + mine).c_str());
  EXPECT_FALSE(read_ledger(target).has_value()) << "another boot's record was taken for this one";

  // Any write sweeps records it can tell are gone: those of other boots too,
  // although a live process holds that PID and start time now.
  LedgerEntry self{};
  ASSERT_TRUE(write_ledger(::getpid(), self).ok());
  EXPECT_TRUE(records_of(*dir, target).empty())
      << "records of another boot were kept: " << records_of(*dir, target).size();
  ASSERT_TRUE(write_ledger(target, e).ok());
  auto back = read_ledger(target);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->generation, 3u);
  ::kill(target, SIGKILL);
  ::waitpid(target, nullptr, 0);
}
