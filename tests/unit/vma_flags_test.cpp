// The madvise state of a process's mappings read by the BPF iterator
// (dump/vma_flags) is the same as smaps says, mapping by mapping.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dump/advice.hpp"
#include "dump/collect.hpp"
#include "dump/vma_flags.hpp"
#include "proc/maps.hpp"

using namespace ckpt;

namespace {

TEST(VmaFlags, SameAdviceAsSmaps) {
  std::string why;
  if (!dump::vma_flags_available(&why)) GTEST_SKIP() << "no BPF VMA-flags iterator here: " << why;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  if (child == 0) {
    // One piece per advice, a plain page between pieces, then two advices at once.
    const int advice[] = {MADV_SEQUENTIAL, MADV_RANDOM,   MADV_DONTFORK,   MADV_WIPEONFORK,
                          MADV_DONTDUMP,   MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_MERGEABLE};
    const size_t n = sizeof advice / sizeof *advice, page = 4096;
    auto* m = static_cast<char*>(::mmap(nullptr, (2 * n + 2) * page, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (size_t i = 0; i < n; ++i) (void)::madvise(m + 2 * i * page, page, advice[i]);
    (void)::madvise(m + 2 * n * page, page, MADV_DONTDUMP);
    (void)::madvise(m + 2 * n * page, page, MADV_WIPEONFORK);
    ::close(ready[0]);
    if (::write(ready[1], "x", 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);

  auto maps = proc::read_maps(child);
  ASSERT_TRUE(maps.ok());
  auto vmas = dump::collect_vmas(child, *maps);
  ASSERT_TRUE(vmas.ok());
  std::vector<image::VmaRecord> bpf = *vmas, smaps = *vmas;
  ASSERT_TRUE(dump::read_advice(child, &bpf).ok());
  ASSERT_TRUE(dump::read_advice_smaps(child, &smaps).ok());
  int advised = 0;
  for (size_t i = 0; i < bpf.size(); ++i) {
    EXPECT_EQ(bpf[i].advice, smaps[i].advice) << "mapping at " << std::hex << bpf[i].start;
    advised += smaps[i].advice != 0;
  }
  EXPECT_GE(advised, 7) << "the child's advice did not show";
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
