// Probes of what this kernel and this caller can do (cr_check).
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <ckpt/check.hpp>
#include <cstring>

#include "dirty/kernel_abi.hpp"
#include "util/fd.hpp"

namespace ckpt {

namespace {

bool has_cap(int cap) {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (::syscall(SYS_capget, &h, d) != 0) return false;
  return d[cap / 32].effective & (1u << (cap % 32));
}

// PAGEMAP_SCAN on our own pagemap, and a userfaultfd with async write-protect.
FeatureCheck probe_pagemap_scan() {
  FeatureCheck c{"pagemap-scan", false, ""};
  UniqueFd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (!pm.valid()) return c.detail = "cannot open /proc/self/pagemap", c;
  static char probe_page[4096] __attribute__((aligned(4096)));
  probe_page[0] = 1;
  kabi::page_region regions[4];
  kabi::pm_scan_arg arg{};
  arg.size = sizeof arg;
  arg.start = reinterpret_cast<uint64_t>(probe_page);
  arg.end = arg.start + sizeof probe_page;
  arg.vec = reinterpret_cast<uint64_t>(regions);
  arg.vec_len = 4;
  arg.category_anyof_mask = kabi::kPageIsPresent;
  arg.return_mask = kabi::kPageIsPresent;
  if (::ioctl(pm.get(), kabi::kPagemapScan, &arg) < 0)
    return c.detail = "kernel has no PAGEMAP_SCAN (needs Linux 6.7+)", c;

  int uffd = int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (uffd < 0 && errno == EPERM)
    uffd = int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kabi::kUffdUserModeOnly));
  if (uffd < 0) return c.detail = std::string("userfaultfd: ") + std::strerror(errno), c;
  UniqueFd ufd(uffd);
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kabi::kUffdFeatureWpAsync | kabi::kUffdFeatureWpUnpopulated;
  if (::ioctl(ufd.get(), UFFDIO_API, &api) != 0 || !(api.features & kabi::kUffdFeatureWpAsync))
    return c.detail = "userfaultfd lacks asynchronous write-protect (WP_ASYNC)", c;
  c.ok = true;
  c.detail = "PAGEMAP_SCAN and userfaultfd WP_ASYNC available";
  return c;
}

// Soft-dirty: clear_refs "4", write a page, look for pagemap bit 55.
FeatureCheck probe_soft_dirty() {
  FeatureCheck c{"soft-dirty", false, ""};
  UniqueFd cr(::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC));
  if (!cr.valid()) return c.detail = "cannot open /proc/self/clear_refs", c;
  if (::write(cr.get(), "4", 1) != 1)
    return c.detail = "kernel built without CONFIG_MEM_SOFT_DIRTY (clear_refs 4 refused)", c;
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return c.detail = "mmap failed", c;
  static_cast<volatile char*>(p)[0] = 1;
  UniqueFd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  uint64_t e = 0;
  bool got =
      pm.valid() && ::pread(pm.get(), &e, 8, off_t(reinterpret_cast<uint64_t>(p) / 4096 * 8)) == 8;
  ::munmap(p, 4096);
  if (!got) return c.detail = "cannot read /proc/self/pagemap", c;
  if (!(e & kabi::kPmSoftDirty))
    return c.detail = "no soft-dirty bit on written pages (kernel without CONFIG_MEM_SOFT_DIRTY)",
           c;
  c.ok = true;
  c.detail = "clear_refs 4 and pagemap bit 55 work";
  return c;
}

FeatureCheck probe_kmod() {
  FeatureCheck c{"kmod", false, ""};
  struct stat st;
  if (::stat("/dev/ckpt_dirty", &st) != 0)
    c.detail = "ckpt_dirty module not loaded (/dev/ckpt_dirty missing)";
  else
    c.detail = "/dev/ckpt_dirty present, but this build has no kmod tracker yet";
  return c;
}

}  // namespace

std::vector<FeatureCheck> check_system() {
  std::vector<FeatureCheck> out;
  utsname u{};
  ::uname(&u);
  out.push_back({"kernel", true, std::string(u.release)});

  bool root = ::geteuid() == 0;
  bool cr = root || has_cap(CAP_CHECKPOINT_RESTORE);
  out.push_back({"restore-pid", cr,
                 cr ? "can create a process with a chosen PID (clone3 set_tid)"
                    : "needs root or CAP_CHECKPOINT_RESTORE to restore the original PID"});
  bool res = root || has_cap(CAP_SYS_RESOURCE);
  out.push_back({"restore-mm", res,
                 res ? "can set the mm fields (prctl PR_SET_MM_MAP)"
                     : "needs root or CAP_SYS_RESOURCE for PR_SET_MM_MAP"});
  std::string scope = "no Yama: ptrace rights follow uid and capabilities";
  if (auto s = read_file("/proc/sys/kernel/yama/ptrace_scope"); s.ok())
    scope = "Yama ptrace_scope " + s->substr(0, s->find('\n'));
  out.push_back({"ptrace", true, scope});

  out.push_back(probe_kmod());
  out.push_back(probe_pagemap_scan());
  out.push_back(probe_soft_dirty());
  out.push_back({"hash", true, "xxh3 of every page: works on any kernel"});
  return out;
}

}  // namespace ckpt
