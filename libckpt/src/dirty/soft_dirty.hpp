// The soft-dirty tracker: the kernel's own per-PTE "written since clear"
// bit (CONFIG_MEM_SOFT_DIRTY; Debian's, Ubuntu's and RHEL's kernels have it).
//   arm:     "4" into /proc/PID/clear_refs clears every soft-dirty bit (and
//            write-protects the PTEs so the next write sets it again);
//   collect: pagemap bit 55 of every tracked page, then clear again.
// No state lives in the target. To stay free of false negatives:
//   - a page that is neither present nor swapped is reported too (a page
//     dropped by MADV_DONTNEED has no PTE, so no soft-dirty bit, yet it
//     changed); the checkpoint finds it empty and restores it as fresh,
//     which costs no reads;
//   - in private file mappings, pages that are the file's own (page cache)
//     are reported too: a COW copy dropped by MADV_DONTNEED and read back in
//     has no soft-dirty bit, yet changed back to the file's content (found
//     by tests/kernel's incremental_chain run under Debian's kernel);
//   - parts of a VMA not covered by the previous layout are `unknown`
//     (new mappings also carry VM_SOFTDIRTY, which marks every page);
//   - shared anonymous memory is always `unknown` (another process may have
//     written it through its own page tables).
#pragma once

#include <ckpt/check.hpp>

#include "dirty/tracker.hpp"

namespace ckpt::dirty {

class SoftDirtyTracker : public Tracker {
 public:
  TrackerKind kind() const override { return TrackerKind::soft_dirty; }
  // Whether this kernel sets soft-dirty bits (a write after clear_refs 4).
  static FeatureCheck probe();

  Status arm(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state) override;
  Result<DirtySet> collect(pid_t pid, const std::vector<image::VmaRecord>& vmas,
                           const std::vector<image::VmaRecord>& prev, TrackerState* state) override;
};

}  // namespace ckpt::dirty
