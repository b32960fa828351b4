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
#include "proc/btf.hpp"
#include "proc/maps.hpp"
#include "util/fd.hpp"

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

namespace {

// The kernel's BTF as the reader finds it, and cut short anywhere: found
// fields where whole, a clean error where not (ASan in the sanitizer pass).
TEST(Btf, FindsVmaFieldsAndRefusesTruncatedData) {
  auto raw = ckpt::read_file("/sys/kernel/btf/vmlinux");
  if (!raw.ok()) GTEST_SKIP() << "no kernel BTF here: " << raw.error().message;
  std::vector<uint8_t> blob(raw->begin(), raw->end());
  auto btf = proc::Btf::parse(blob);
  ASSERT_TRUE(btf.ok()) << btf.error().message;
  auto start = btf->field("vm_area_struct", "vm_start");
  auto flags = btf->field("vm_area_struct", "vm_flags");  // inside an anonymous union since 6.3
  ASSERT_TRUE(start.ok() && flags.ok());
  EXPECT_EQ(start->size, 8u);
  EXPECT_EQ(flags->size, 8u);
  EXPECT_NE(start->offset, flags->offset);
  EXPECT_TRUE(btf->func_id("bpf_iter_task_vma").ok());
  EXPECT_TRUE(btf->field("bpf_iter_link_info", "task").ok());  // a union: Linux 6.1+
  EXPECT_FALSE(btf->field("vm_area_struct", "no_such_field").ok());
  for (size_t cut :
       {size_t(0), size_t(10), size_t(24), size_t(100), blob.size() / 2, blob.size() - 1}) {
    std::vector<uint8_t> part(blob.begin(), blob.begin() + long(cut));
    EXPECT_FALSE(proc::Btf::parse(part).ok()) << "cut at " << cut;
  }
}

}  // namespace
