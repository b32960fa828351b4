// Whether this kernel can run the pagemap-scan tracker: PAGEMAP_SCAN, an
// asynchronous write-protect userfaultfd, and a self-test on the tool's own
// memory that zapped pages read as written (kernels before the hole fix did
// not).
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <string>

#include "dirty/pagemap_query.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dirty/self_test_record.hpp"
#include "dirty/target_uffd.hpp"
#include "util/fd.hpp"

namespace ckpt::dirty {

namespace {

constexpr const char* kWorks =
    "PAGEMAP_SCAN and userfaultfd WP_ASYNC available; zapped pages read as written";

FeatureCheck self_test() {
  FeatureCheck c{"pagemap-scan", false, ""};
  UniqueFd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (!pm.valid()) return c.detail = "cannot open /proc/self/pagemap", c;
  UniqueFd uffd(int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK)));
  if (!uffd.valid() && errno == EPERM)
    uffd.reset(int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kabi::kUffdUserModeOnly)));
  if (!uffd.valid()) return c.detail = std::string("userfaultfd: ") + std::strerror(errno), c;
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kFeatures;
  if (::ioctl(uffd.get(), UFFDIO_API, &api) != 0 || (api.features & kFeatures) != kFeatures)
    return c.detail = "userfaultfd lacks asynchronous write-protect (WP_ASYNC, Linux 6.7+)", c;

  // Self-test on 4 MiB of our own memory: a write, a zapped page, and a
  // zapped 2 MiB range (a THP if we get one) whose page table goes away.
  constexpr uint64_t kHuge = 2 << 20;
  void* raw =
      ::mmap(nullptr, 3 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return c.detail = "self-test: mmap failed", c;
  char* mem = reinterpret_cast<char*>((reinterpret_cast<uint64_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  struct Unmap {
    void* p;
    ~Unmap() { ::munmap(p, 3 * kHuge); }
  } unmap{raw};
  (void)::madvise(mem, 2 * kHuge, MADV_HUGEPAGE);
  std::memset(mem, 1, 2 * kHuge);
  (void)::madvise(mem + kHuge, kHuge, 25 /* MADV_COLLAPSE: best effort */);
  std::vector<kabi::page_region> buf(64);
  Scanner sc(pm.get(), buf);
  Range all{reinterpret_cast<uint64_t>(mem), 2 * kHuge};
  if (register_wp(uffd.get(), all) != 0)
    return c.detail = std::string("self-test: UFFDIO_REGISTER: ") + std::strerror(errno), c;
  if (int e = sc.scan(all.addr, all.end(), kWritten, nullptr))
    return c.detail = e == -ENOTTY || e == -EINVAL
                          ? "kernel has no PAGEMAP_SCAN (needs Linux 6.7+)"
                          : std::string("self-test: PAGEMAP_SCAN: ") + std::strerror(-e),
           c;
  mem[3 * kPage] = 2;
  ::madvise(mem + kPage, kPage, MADV_DONTNEED);
  ::madvise(mem + kHuge, kHuge, MADV_DONTNEED);
  std::vector<Range> got;
  if (int e = sc.scan(all.addr, all.end(), kWritten, &got))
    return c.detail = std::string("self-test: PAGEMAP_SCAN: ") + std::strerror(-e), c;
  std::vector<Range> need{
      {all.addr + kPage, kPage}, {all.addr + 3 * kPage, kPage}, {all.addr + kHuge, kHuge}};
  normalize(got);
  if (!subtract(need, got).empty())
    return c.detail =
               "kernel does not report pages zapped by MADV_DONTNEED as written "
               "(needs the PAGEMAP_SCAN hole fix)",
           c;
  c.ok = true;
  c.detail = kWorks;
  return c;
}

}  // namespace

// The self-test faults in and zaps 4 MiB (milliseconds): once per boot
// (dirty/self_test_record.hpp), else once per process before the first
// freeze (job/checkpoint.cpp asks early). The kernel's answer does not change
// while it runs; a failure, which may be ours (no memory, no descriptor
// left), is asked again.
FeatureCheck PagemapScanTracker::probe() {
  static std::mutex mu;
  static std::optional<FeatureCheck> passed;
  std::lock_guard<std::mutex> hold(mu);
  if (passed) return *passed;
  if (self_test_passed_this_boot("pagemap-scan")) {
    passed = FeatureCheck{"pagemap-scan", true,
                          std::string(kWorks) + " (self-test passed earlier in this boot)"};
    return *passed;
  }
  FeatureCheck c = self_test();
  if (c.ok) {
    passed = c;
    record_self_test_pass("pagemap-scan");
  }
  return c;
}

Status PagemapScanTracker::available() {
  if (!probed_) probed_ = probe();
  if (!probed_->ok) return make_error(ENOTSUP, "pagemap-scan tracker: " + probed_->detail);
  return {};
}

}  // namespace ckpt::dirty
