// Filling a new process's anonymous memory with UFFDIO_COPY. The kernel
// allocates each page and copies into it; a write through process_vm_writev
// first faults in a zeroed page and then copies, and clearing those pages
// was a third of a restore's samples (docs/performance.md). Only where no
// transparent huge page would back the memory: a fault there gets a 2 MiB
// page, UFFDIO_COPY fills 4 KiB ones.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <functional>
#include <vector>

#include "image/model.hpp"
#include "mem/range.hpp"
#include "util/fd.hpp"

namespace ckpt::restore {

class UffdFill {
 public:
  // Runs a system call in the new process; returns its result (-errno on failure).
  using CallFn = std::function<Result<long>(long nr, uint64_t a1)>;

  // transparent_hugepage/enabled, as this kernel has it.
  enum class Thp { kAlways, kMadvise, kNever };
  static Thp thp_mode();
  // The mappings of `vmas` it may fill: private, anonymous, not special,
  // and not backed by huge pages under `thp`.
  static std::vector<mem::Range> eligible(const std::vector<image::VmaRecord>& vmas, Thp thp);

  // A userfaultfd of process `pid` (made in it through `call`, then taken
  // with pidfd_getfd and closed there) with `ranges` registered. Inactive
  // (active() false) where the kernel refuses any of it, or with
  // LIBCKPT_RESTORE_UFFD=0 (A/B runs): the caller writes as before.
  UffdFill(pid_t pid, const CallFn& call, const std::vector<mem::Range>& ranges);
  bool active() const { return fd_.valid(); }
  // Whether [addr, addr + len) lies in one registered range (never when
  // inactive: nothing is registered then).
  bool covers(uint64_t addr, uint64_t len) const;
  // Copies into a covered range. A page present already (nothing should be)
  // is written with process_vm_writev instead.
  Status copy(uint64_t dst, const void* src, uint64_t len) const;
  // Closing the userfaultfd unregisters every range: the pages left out
  // (zero in the image) fault in zeroed as usual from then on.

 private:
  pid_t pid_;
  UniqueFd fd_;
  std::vector<mem::Range> ranges_;  // sorted
};

}  // namespace ckpt::restore
