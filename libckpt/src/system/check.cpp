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
#include "dirty/pagemap_scan.hpp"
#include "util/fd.hpp"

namespace ckpt {

namespace {

bool has_cap(int cap) {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (::syscall(SYS_capget, &h, d) != 0) return false;
  return d[cap / 32].effective & (1u << (cap % 32));
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
  out.push_back(dirty::PagemapScanTracker::probe());
  out.push_back(probe_soft_dirty());
  out.push_back({"hash", true, "xxh3 of every page: works on any kernel"});
  return out;
}

}  // namespace ckpt
