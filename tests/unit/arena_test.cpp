// dump/arena: capture memory kept for the next capture in this process,
// reclaimable while idle, and never handed to a forked child.
#include "dump/arena.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dump/capture.hpp"
#include "dump/memory.hpp"

namespace ckpt::dump {
namespace {

constexpr uint64_t kBytes = 8 * kBatchBytes;

// LazyFree kB of the mapping that holds `addr` (/proc/self/smaps).
long lazy_free_kb(const void* addr) {
  FILE* f = std::fopen("/proc/self/smaps", "re");
  if (!f) return -1;
  char line[512];
  bool in = false;
  long kb = -1;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      in = a >= lo && a < hi;
      continue;
    }
    if (in && std::sscanf(line, "LazyFree: %ld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb;
}

class ArenaTest : public ::testing::Test {
 protected:
  void SetUp() override { release_arenas(); }
  void TearDown() override { release_arenas(); }
};

TEST_F(ArenaTest, KeptReclaimableAndTakenAgain) {
  Arena a = take_arena(kBytes);
  ASSERT_NE(a.start, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.start) % kBatchBytes, 0u);
  EXPECT_GE(a.bytes, kBytes);
  std::memset(a.start, 0x5a, kBytes);
  a.touched = kBytes;
  uint8_t* start = a.start;
  return_arena(a, true);
  // Idle, it is the kernel's to reclaim.
  EXPECT_GT(lazy_free_kb(start), 0);
  // The same memory for a request it covers, with what it touched.
  Arena b = take_arena(kBytes / 2);
  EXPECT_EQ(b.start, start);
  EXPECT_EQ(b.touched, kBytes);
  // Written again, it is the process's own once more.
  std::memset(b.start, 1, kBytes);
  EXPECT_EQ(lazy_free_kb(start), 0);
  // A larger request than anything kept gets a new reservation.
  Arena c = take_arena(2 * b.bytes);
  EXPECT_NE(c.start, b.start);
  EXPECT_EQ(c.touched, 0u);
  return_arena(b, true);
  return_arena(c, true);
  // ckpt::release_buffers(): nothing kept stays mapped.
  release_arenas();
  EXPECT_EQ(lazy_free_kb(start), -1);
  EXPECT_EQ(lazy_free_kb(c.start), -1);
}

TEST_F(ArenaTest, NotKeptWhenTurnedOff) {
  Arena a = take_arena(kBytes);
  ASSERT_NE(a.start, nullptr);
  a.touched = kBatchBytes;
  std::memset(a.start, 1, kBatchBytes);
  uint8_t* start = a.start;
  return_arena(a, false);
  // Unmapped: no mapping holds the address any more.
  EXPECT_EQ(lazy_free_kb(start), -1);
}

TEST_F(ArenaTest, AForkedChildNeverGetsTheParentsArena) {
  Arena a = take_arena(kBytes);
  ASSERT_NE(a.start, nullptr);
  std::memset(a.start, 1, kBatchBytes);
  a.touched = kBatchBytes;
  return_arena(a, true);
  pid_t child = ::fork();
  if (child == 0) {
    // Not mapped here (MADV_DONTFORK): a child that took the parent's
    // arena from the list would die writing to it.
    Arena b = take_arena(kBytes);
    if (!b.start) ::_exit(2);
    std::memset(b.start, 2, kBytes);
    ::_exit(b.touched == 0 ? 0 : 3);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFEXITED(st)) << "child killed by signal " << WTERMSIG(st);
  EXPECT_EQ(WEXITSTATUS(st), 0);
  // The parent still has it.
  Arena c = take_arena(kBytes);
  EXPECT_EQ(c.start, a.start);
  return_arena(c, true);
}

TEST_F(ArenaTest, ACaptureKeepsWhatItFaultedInForTheNext) {
  { Capture(kBytes).prefault(kBytes); }
  Arena kept = take_arena(kBytes);
  ASSERT_NE(kept.start, nullptr);
  EXPECT_EQ(kept.touched, kBytes);
  return_arena(kept, true);
}

TEST_F(ArenaTest, ACaptureToldNotToKeepLeavesNothing) {
  CaptureTuning t;
  t.keep_buffers = false;
  { Capture(kBytes, t).prefault(kBytes); }
  Arena fresh = take_arena(kBytes);
  ASSERT_NE(fresh.start, nullptr);
  EXPECT_EQ(fresh.touched, 0u);
  return_arena(fresh, false);
}

}  // namespace
}  // namespace ckpt::dump
