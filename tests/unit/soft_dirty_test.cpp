// The soft-dirty tracker against a real child process. Skipped (with the
// reason) on kernels without CONFIG_MEM_SOFT_DIRTY, such as the development
// kernel; runs in the Debian-kernel guest of tests/kernel.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "dirty/soft_dirty.hpp"

namespace ckpt::dirty {
namespace {

constexpr uint64_t P = image::kPageSize;
constexpr int kPages = 64;

// A child with kPages populated pages that writes ('w') or drops ('d') page
// N on command and answers one byte when done.
struct Child {
  pid_t pid = 0;
  int cmd = -1, ack = -1;
  uint64_t base = 0;

  void start() {
    int c[2], a[2], b[2];
    ASSERT_EQ(::pipe(c), 0);
    ASSERT_EQ(::pipe(a), 0);
    ASSERT_EQ(::pipe(b), 0);
    pid = ::fork();
    if (pid == 0) {
      auto* mem = static_cast<char*>(
          ::mmap(nullptr, kPages * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      for (int i = 0; i < kPages; ++i) mem[i * P] = 1;
      uint64_t addr = reinterpret_cast<uint64_t>(mem);
      (void)!::write(b[1], &addr, sizeof addr);
      char op[2];
      while (::read(c[0], op, 2) == 2) {
        if (op[0] == 'w') mem[op[1] * P + 7] = 42;
        if (op[0] == 'd') ::madvise(mem + op[1] * P, P, MADV_DONTNEED);
        (void)!::write(a[1], "k", 1);
      }
      ::_exit(0);
    }
    cmd = c[1];
    ack = a[0];
    ASSERT_EQ(::read(b[0], &base, sizeof base), ssize_t(sizeof base));
  }
  void op(char what, int page) {
    char o[2] = {what, char(page)};
    ASSERT_EQ(::write(cmd, o, 2), 2);
    char k;
    ASSERT_EQ(::read(ack, &k, 1), 1);
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

std::set<int> pages_of(const std::vector<mem::Range>& ranges, uint64_t base) {
  std::set<int> out;
  for (const auto& r : ranges)
    for (uint64_t a = r.addr; a < r.end(); a += P)
      if (a >= base && a < base + kPages * P) out.insert(int((a - base) / P));
  return out;
}

TEST(SoftDirty, ReportsExactlyTheWrittenPagesAndDroppedOnes) {
  FeatureCheck c = SoftDirtyTracker::probe();
  if (!c.ok) GTEST_SKIP() << "kernel lacks soft-dirty: " << c.detail;
  Child child;
  child.start();
  image::VmaRecord v;
  v.start = child.base;
  v.end = child.base + kPages * P;
  v.prot = PROT_READ | PROT_WRITE;
  std::vector<image::VmaRecord> vmas = {v};
  SoftDirtyTracker t;
  TrackerState st;
  ASSERT_TRUE(t.arm(child.pid, vmas, &st).ok());
  for (int p : {3, 10, 11}) child.op('w', p);
  auto d = t.collect(child.pid, vmas, vmas, &st);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(pages_of(d->written, child.base), (std::set<int>{3, 10, 11}));
  EXPECT_TRUE(d->unknown.empty());

  // Next round: tracking restarted; a dropped page is reported, a written one too.
  child.op('d', 20);
  child.op('w', 40);
  d = t.collect(child.pid, vmas, vmas, &st);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(pages_of(d->written, child.base), (std::set<int>{20, 40}));

  // A mapping absent from the previous layout is unknown as a whole.
  d = t.collect(child.pid, vmas, {}, &st);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(pages_of(d->unknown, child.base).size(), size_t(kPages));
}

}  // namespace
}  // namespace ckpt::dirty
