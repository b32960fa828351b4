// The pagemap-scan tracker: PAGEMAP_SCAN on /proc/PID/pagemap plus an
// asynchronous write-protect userfaultfd (UFFD_FEATURE_WP_ASYNC, Linux 6.7+)
// that belongs to the target. Writes to protected pages are resolved in the
// kernel (no signal, no round trip to us) and leave the page "written";
// one PAGEMAP_SCAN per VMA then lists the written pages and protects them
// again.
//
// The userfaultfd lives inside the target so that tracking survives between
// tool runs: arm() makes the target create it with an injected system call,
// moves it to kTrackerFd (close-on-exec; the next free number above it when
// taken) and records the number in TrackerState::target_fd. Later runs reach
// it with pidfd_getfd. Tracking ends by itself when the target execs or
// closes that fd; collect() then reports `everything` and arms afresh.
//
// Which VMAs are tracked, and how:
// - private anonymous memory ([heap], [stack], anonymous, PROT_NONE
//   reservations included: a reservation zapped with MADV_DONTNEED and
//   re-enabled later must not come back with stale data): registered and
//   scanned for written pages. Zapped pages (MADV_DONTNEED, MADV_FREE after
//   reclaim, brk shrink + regrow) read as written. PMD-mapped transparent
//   huge pages are left unprotected unless their content stopped changing
//   (dirty/huge_blocks.hpp): the first write to a protected one splits it.
// - private file mappings: registered, but their private (COW) copies are
//   never write-protected and are reported on every collect. A protected COW
//   page dropped with MADV_DONTNEED reverts to the file's page and the
//   kernel keeps it protected (a uffd-wp marker), so it would read as
//   unwritten although its content changed. Unprotected, its drop leaves an
//   empty entry, which reads as written. Page-cache pages and empty entries
//   are protected as usual, so reading a file page never makes it dirty.
// - shared anonymous memory: reported `unknown` on every collect (another
//   process may write it through its own page tables, which we do not see).
// - shared file mappings, [vdso], [vvar]*: not reported (the file holds the
//   content; the vdso comes from the kernel).
// - hugetlb and VMAs larger than kMaxTrackedBytes: `unknown` every time (an
//   empty hugetlb entry reads as unwritten; protecting a huge sparse range
//   would allocate page tables for all of it: 2 MiB per GiB).
//
// Layout changes: a VMA the userfaultfd does not cover (new, moved by
// mremap, replaced by MAP_FIXED or munmap+mmap) makes PAGEMAP_SCAN fail with
// EPERM; it is registered, protected and reported `unknown` as a whole.
// Every collect also re-registers each VMA (a no-op for ours), which fails
// for a VMA owned by another userfaultfd: that VMA is `unknown` and left
// alone. Parts of a VMA that no VMA of the same kind (flags, name, same
// file at the same offset) covered in `prev` are `unknown`: a grown heap or
// stack keeps its registration, but its new part had no page to compare.
//
// Caller contract: pages in `written` or `unknown` that are not populated,
// or that are no longer private copies of a file mapping, changed too (to
// zero, or back to the file's content): the checkpoint must record them so
// older generations do not supply stale data for them.
#pragma once

#include <sys/types.h>

#include <ckpt/check.hpp>
#include <optional>
#include <vector>

#include "dirty/adaptive.hpp"
#include "dirty/huge_blocks.hpp"
#include "dirty/layout.hpp"
#include "dirty/tracker.hpp"
#include "mem/kernel_abi.hpp"
#include "util/fd.hpp"

namespace ckpt::dirty {

// Where the tracker's userfaultfd lives in the target (unless taken).
constexpr int kTrackerFd = 1000;
// The number of the userfaultfd this tracker made in `pid` last if it is
// still there and still ours (recorded next to the process's ledger entry,
// so one made at another number because the job holds fd 1000 is known
// too, e.g. after a checkpoint that failed once it had armed); else
// kTrackerFd. A checkpoint does not save it, and a new arm reuses it.
int own_uffd_number(pid_t pid);
// Larger private VMAs are reported `unknown` rather than tracked.

class PagemapScanTracker : public Tracker {
 public:
  struct Options {
    // page_region slots per PAGEMAP_SCAN call; scans resume when they fill.
    size_t scan_regions = 16384;
    // Which written blocks stay unprotected between collects (dirty/adaptive).
    AdaptiveOptions adaptive;
    // Whether PMD-mapped huge pages stay unprotected (dirty/huge_blocks).
    HugeOptions huge;
    // The caller's choices (TrackingOptions) over the defaults above.
    static Options from(const TrackingOptions& t);
  };

  PagemapScanTracker() : PagemapScanTracker(Options{}) {}
  explicit PagemapScanTracker(Options opts);

  // Whether this kernel can track: PAGEMAP_SCAN, a userfaultfd with
  // WP_ASYNC, and a self-test that zapped pages (one page, and a whole 2 MiB
  // page-table range) read as written; kernels before the hole fix did not.
  static FeatureCheck probe();

  TrackerKind kind() const override { return TrackerKind::pagemap_scan; }
  Status arm(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state) override;
  // A fresh userfaultfd (not one kept from an earlier chain, which arm()
  // must check frozen): registering and protecting, the arm's long part,
  // then runs while the process runs.
  Result<bool> install(pid_t pid, TrackerState* state) override;
  Result<DirtySet> collect(pid_t pid, const std::vector<image::VmaRecord>& vmas,
                           const std::vector<image::VmaRecord>& prev, TrackerState* state) override;
  bool wants_full_hashes() const override {
    return opts_.adaptive.enabled && opts_.adaptive.sampled_arm;
  }
  // Verifies the fresh blocks whose sample stayed calm (dirty/adaptive.hpp):
  // protects each whole, then reads its pages that read as written and
  // compares them with the parent's (the full's) hashes.
  void before_freeze(pid_t pid, const std::vector<image::PageHash>& parent_hashes,
                     const TrackerState& state) override;
  // After this object's collect (an incremental, adaptive tracking on): the
  // pages read go through dirty/changed_pages, which keeps those whose
  // content differs from the parent's and records, per block, what changed
  // for the next collect (dirty/adaptive.hpp, "Bounded"). nullptr for a full.
  std::unique_ptr<ContentFilter> filter(const std::vector<image::PageHash>& prev,
                                        image::SnapshotWriter& writer) override;
  // Populated pages of its private anonymous memory that read as written (a
  // scan that protects nothing).
  uint64_t written_estimate(pid_t pid, const TrackerState& state) override;
  // Closes the target's userfaultfd (an injected close): the kernel then
  // drops the registrations and the write protection with it.
  Result<bool> release(pid_t pid, const TrackerState& state) override;
  // The last collect's adaptive decisions: bytes left unprotected for the
  // next interval, bytes protected to be measured.
  uint64_t hot_bytes() const { return hot_bytes_; }
  uint64_t sampled_bytes() const { return sampled_bytes_; }
  // The last collect's huge pages: bytes left unprotected (saved whole),
  // bytes protected because their content had not changed.
  uint64_t huge_kept_bytes() const { return huge_kept_bytes_; }
  // before_freeze(): bytes of blocks verified.
  uint64_t verified_bytes() const { return verified_bytes_; }
  uint64_t huge_quiet_bytes() const { return huge_quiet_bytes_; }
  // ... and bytes of blocks written after such a protection, given back.
  uint64_t huge_repaired_bytes() const { return huge_repaired_bytes_; }

 private:
  Status available();
  // `replace_fd` >= 0: the target's stale userfaultfd number to take over.
  Status arm_tracking(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state);
  Status arm_fresh(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state,
                   int replace_fd);
  // Frozen: a new userfaultfd in the target at `replace_fd` (or a free
  // number), UFFDIO_API done; state->target_fd names it.
  Result<UniqueFd> install_fresh(pid_t pid, TrackerState* state, int replace_fd);
  // Registers and protects through a fresh userfaultfd (install_fresh).
  Status track_fresh(pid_t pid, int uffd, const std::vector<image::VmaRecord>& vmas,
                     const TrackerState& state);
  // Registers and protects `vmas`; sets *foreign when the userfaultfd turns
  // out not to serve this process's memory (an fd inherited across fork).
  // `reused`: a userfaultfd kept from before, checked before registering.
  // Blocks the process's last collect found hot are protected on a sample
  // only (dirty/adaptive.hpp), recorded for `state`'s generation.
  Status track(pid_t pid, int uffd, const std::vector<image::VmaRecord>& vmas, bool reused,
               const TrackerState& state, bool* foreign);
  // collect()'s answers when the history is gone: everything dirty, and
  // tracking armed again, afresh (a new userfaultfd, at `replace_fd` when
  // >= 0) or through the same userfaultfd.
  DirtySet tracking_lost(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state,
                         const std::string& why, int replace_fd);
  DirtySet history_lost(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state,
                        const std::string& why);
  // before_freeze()'s claim token if it was for `state`'s generation, else
  // 0; the claim is consumed.
  uint64_t take_claim(const TrackerState& state);
  // A successful collect's decisions, kept for the next one and for filter().
  void remember(pid_t pid, const TrackerState& state, const AdaptiveTracking& adaptive,
                const HugeBlocks& huge);

  Options opts_;
  std::optional<FeatureCheck> probed_;
  UniqueFd installed_;  // install()'s userfaultfd, for the next arm()
  // The generation before_freeze() claimed in the ledger (and verified
  // blocks for) and the claim's token (dirty/ledger), for the collect of the
  // same generation.
  struct Claim {
    TrackerState state;
    uint64_t token = 0;
  };
  std::optional<Claim> claim_;
  VerifiedBlocks verified_;
  // The last successful collect's process and generation (for filter()).
  struct Collected {
    pid_t pid;
    TrackerState state;
  };
  std::optional<Collected> collected_;
  std::vector<kabi::page_region> regions_;  // PAGEMAP_SCAN output buffer, reused
  uint64_t hot_bytes_ = 0, sampled_bytes_ = 0;
  uint64_t huge_kept_bytes_ = 0, huge_quiet_bytes_ = 0, huge_repaired_bytes_ = 0;
  uint64_t verified_bytes_ = 0;
};

}  // namespace ckpt::dirty
