// restore/uffd_fill: which mappings it fills, and a fill of real memory.
// The filled process is a forked child filling its own memory (as if it
// were the new process), so that a fault left waiting on the userfaultfd
// could only hang that child, which an alarm ends.
#include "restore/uffd_fill.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace ckpt::restore {
namespace {

image::VmaRecord vma(uint64_t start, uint32_t flags, uint32_t advice) {
  image::VmaRecord v;
  v.start = start;
  v.end = start + 0x10000;
  v.flags = flags;
  v.advice = advice;
  return v;
}

TEST(UffdFill, FillsPrivateAnonymousMemoryThatNoHugePageBacks) {
  const std::vector<image::VmaRecord> vmas = {
      vma(0x100000, 0, 0),                      // plain anonymous
      vma(0x200000, image::kVmaFile, 0),        // a file's pages
      vma(0x300000, image::kVmaShared, 0),      // shared anonymous (shmem)
      vma(0x400000, image::kVmaVdso, 0),        // special
      vma(0x500000, 0, image::kAdvHugePage),    // asked for huge pages
      vma(0x600000, 0, image::kAdvNoHugePage),  // refused them
  };
  auto starts = [&](UffdFill::Thp thp) {
    std::vector<uint64_t> out;
    for (const mem::Range& r : UffdFill::eligible(vmas, thp)) out.push_back(r.addr);
    return out;
  };
  EXPECT_EQ(starts(UffdFill::Thp::kNever), (std::vector<uint64_t>{0x100000, 0x500000, 0x600000}));
  EXPECT_EQ(starts(UffdFill::Thp::kMadvise), (std::vector<uint64_t>{0x100000, 0x600000}));
  EXPECT_EQ(starts(UffdFill::Thp::kAlways), (std::vector<uint64_t>{0x600000}));
  EXPECT_EQ(UffdFill::eligible(vmas, UffdFill::Thp::kNever)[0].len, 0x10000u);
}

// In a child: fills 16 pages (page 5 present already) and checks every byte,
// then, with the userfaultfd closed, that a page left out reads as zeros.
// Exit codes: 0 fine, 2 the kernel refused (no userfaultfd), 1 wrong.
int fill_in_child() {
  constexpr size_t kPages = 16, kPg = 4096;
  auto* mem = static_cast<uint8_t*>(::mmap(nullptr, (kPages + 1) * kPg, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) return 1;
  ::madvise(mem, (kPages + 1) * kPg, MADV_NOHUGEPAGE);
  mem[5 * kPg] = 'x';  // present before the fill: written over the other way
  std::vector<uint8_t> src(kPages * kPg);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + i / kPg);
  {
    UffdFill fill(::getpid(),
                  [](long nr, uint64_t a1) -> Result<long> { return ::syscall(nr, a1); },
                  {mem::Range{reinterpret_cast<uint64_t>(mem), (kPages + 1) * kPg}});
    if (!fill.active()) return 2;
    if (!fill.covers(reinterpret_cast<uint64_t>(mem), kPages * kPg)) return 1;
    if (fill.covers(reinterpret_cast<uint64_t>(mem), (kPages + 2) * kPg)) return 1;
    if (!fill.copy(reinterpret_cast<uint64_t>(mem), src.data(), src.size()).ok()) return 1;
  }
  if (std::memcmp(mem, src.data(), src.size()) != 0) return 1;
  for (size_t i = 0; i < kPg; ++i)
    if (mem[kPages * kPg + i] != 0) return 1;
  return 0;
}

TEST(UffdFill, FillsEveryByteAndLeavesTheRestToOrdinaryFaults) {
  pid_t kid = ::fork();
  ASSERT_GE(kid, 0);
  if (kid == 0) {
    ::alarm(20);
    ::_exit(fill_in_child());
  }
  int st = 0;
  ASSERT_EQ(::waitpid(kid, &st, 0), kid);
  ASSERT_TRUE(WIFEXITED(st)) << "the filling child died (signal " << WTERMSIG(st) << ")";
  if (WEXITSTATUS(st) == 2) GTEST_SKIP() << "this kernel refuses a userfaultfd here";
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

}  // namespace
}  // namespace ckpt::restore
