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

#include "dirty/tracker.hpp"
#include "dump/vma_flags.hpp"
#include "mem/kernel_abi.hpp"
#include "util/caps.hpp"
#include "util/fd.hpp"

namespace ckpt {

std::vector<FeatureCheck> check_system() {
  std::vector<FeatureCheck> out;
  utsname u{};
  ::uname(&u);
  out.push_back({"kernel", true, std::string(u.release)});

  bool root = ::geteuid() == 0;
  bool cr = root || has_effective_cap(CAP_CHECKPOINT_RESTORE);
  out.push_back({"restore-pid", cr,
                 cr ? "can create a process with a chosen PID (clone3 set_tid)"
                    : "needs root or CAP_CHECKPOINT_RESTORE to restore the original PID"});
  // PR_SET_MM_MAP's other fields need nothing; its executable link needs
  // CAP_CHECKPOINT_RESTORE (docs/security.md, "Restores by unprivileged users").
  out.push_back({"restore-mm", cr,
                 cr ? "can set the mm fields and the executable link (prctl PR_SET_MM_MAP)"
                    : "needs root or CAP_CHECKPOINT_RESTORE to set the executable link "
                      "(PR_SET_MM_MAP with exe_fd)"});
  std::string scope = "no Yama: ptrace rights follow uid and capabilities";
  if (auto s = read_file("/proc/sys/kernel/yama/ptrace_scope"); s.ok())
    scope = "Yama ptrace_scope " + s->substr(0, s->find('\n'));
  out.push_back({"ptrace", true, scope});

  std::string why;
  const bool bpf = dump::vma_flags_available(&why);
  out.push_back({"vma-flags", bpf,
                 bpf ? "madvise flags read by a BPF iterator in the freeze (no smaps page walk)"
                     : "madvise flags read from smaps, which walks every page table in the "
                       "freeze (~20 ms per GiB): " +
                           why});
  for (const TrackerInfo& t : tracker_kinds()) out.push_back(dirty::probe_tracker(t.kind));
  return out;
}

}  // namespace ckpt
