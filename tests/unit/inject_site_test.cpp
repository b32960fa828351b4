// find_inject_site keeps the last site found per process and checks it
// instead of searching again (proc/return_frame.cpp): a process whose code
// moved (here: an exec under the same PID) must get a site in its new code.
#include <gtest/gtest.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "proc/maps.hpp"
#include "proc/return_frame.hpp"

using namespace ckpt;
using namespace ckpt::proc;

namespace {

// The site's code is where it says, in an executable mapping.
void expect_valid(pid_t pid, const InjectSite& s) {
  auto maps = read_maps(pid);
  ASSERT_TRUE(maps.ok());
  auto exec_at = [&](uint64_t a) {
    for (const MapEntry& m : *maps)
      if (a >= m.start && a < m.end) return m.x;
    return false;
  };
  EXPECT_TRUE(exec_at(s.syscall_insn));
  ASSERT_NE(s.sigreturn, 0u);
  EXPECT_TRUE(exec_at(s.sigreturn));
  uint8_t code[9] = {};
  iovec l{code, sizeof code}, r{reinterpret_cast<void*>(s.sigreturn), sizeof code};
  ASSERT_EQ(::process_vm_readv(pid, &l, 1, &r, 1, 0), ssize_t(sizeof code));
  static const uint8_t kLong[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  static const uint8_t kShort[] = {0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  EXPECT_TRUE(std::memcmp(code, kLong, sizeof kLong) == 0 ||
              std::memcmp(code, kShort, sizeof kShort) == 0);
  uint8_t call[2] = {};
  iovec l2{call, 2}, r2{reinterpret_cast<void*>(s.syscall_insn), 2};
  ASSERT_EQ(::process_vm_readv(pid, &l2, 1, &r2, 1, 0), 2);
  EXPECT_EQ(call[0], 0x0f);
  EXPECT_EQ(call[1], 0x05);
}

TEST(InjectSite, KeptPerProcessAndFoundAgainAfterExec) {
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t child = ::fork();
  if (child == 0) {
    char c;
    ::close(go[1]);
    if (::read(go[0], &c, 1) != 1) ::_exit(1);
    ::execl("/bin/sleep", "sleep", "30", (char*)nullptr);
    ::_exit(127);
  }
  ::close(go[0]);
  auto first = find_inject_site(child);
  ASSERT_TRUE(first.ok()) << first.error().message;
  expect_valid(child, *first);
  auto again = find_inject_site(child);  // from what was kept
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->syscall_insn, first->syscall_insn);
  EXPECT_EQ(again->sigreturn, first->sigreturn);
  EXPECT_EQ(again->pops, first->pops);

  // The same PID with another program's code.
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  ::close(go[1]);
  for (int i = 0; i < 500; ++i) {
    auto maps = read_maps(child);
    bool sleeping = false;
    if (maps.ok())
      for (const MapEntry& m : *maps) sleeping |= m.path.find("sleep") != std::string::npos;
    if (sleeping) break;
    ::usleep(10000);
  }
  auto after = find_inject_site(child);
  ASSERT_TRUE(after.ok()) << after.error().message;
  expect_valid(child, *after);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
