// PAGEMAP_SCAN as the pagemap-scan tracker uses it: the selections it
// makes (Query) and a Scanner that runs them over a range, resuming where a
// full buffer stopped, on a target's /proc/PID/pagemap.
#pragma once

#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "dirty/layout.hpp"
#include "dirty/tracker.hpp"
#include "image/model.hpp"
#include "mem/kernel_abi.hpp"
#include "mem/range.hpp"
#include "proc/maps.hpp"

namespace ckpt::dirty {

using mem::Range;

// One PAGEMAP_SCAN selection. `protect`: write-protect what matched
// (PM_SCAN_WP_MATCHING). Every scan sets PM_SCAN_CHECK_WPASYNC, so a range
// not registered with an async write-protect userfaultfd fails with EPERM.
struct Query {
  uint64_t inverted, mask, anyof;
  bool protect;
};
// Written pages. Exactly this mask/return mask takes the kernel's fast path.
constexpr Query kWritten{0, kabi::kPageIsWritten, 0, true};
// Written pages that are not PMD-mapped huge pages: those are left
// unprotected (dirty/huge_blocks). Measured as fast as kWritten here.
constexpr Query kWrittenSmall{kabi::kPageIsHuge, kabi::kPageIsWritten | kabi::kPageIsHuge, 0, true};
// Unprotected PMD-mapped huge pages, and all of them, left as they are.
constexpr Query kHugeUnprotected{0, kabi::kPageIsWritten | kabi::kPageIsHuge, 0, false};
constexpr Query kHugeMapped{0, kabi::kPageIsHuge, 0, false};
// Populated pages (in memory or swapped out), left as they are.
constexpr Query kPopulated{0, 0, kabi::kPageIsPresent | kabi::kPageIsSwapped, false};
// Pages in memory: how dense a block is (a protected empty entry, a PTE
// marker, counts as swapped: a re-armed sparse range would look full).
constexpr Query kPresent{0, kabi::kPageIsPresent, 0, false};
// Populated pages that read as written, left as they are (an estimate of
// what the next collect reports).
constexpr Query kWrittenPresent{0, kabi::kPageIsWritten | kabi::kPageIsPresent, 0, false};
// The same, leaving them unprotected (blocks kept hot: dirty/adaptive).
constexpr Query kWrittenKeep{0, kabi::kPageIsWritten, 0, false};
// File VMAs: written page-cache pages ...
constexpr Query kWrittenFilePages{0, kabi::kPageIsWritten | kabi::kPageIsFile, 0, true};
// ... and empty entries (never faulted in, or a private copy dropped) ...
constexpr Query kEmptyEntries{kabi::kPageIsPresent | kabi::kPageIsSwapped,
                              kabi::kPageIsWritten | kabi::kPageIsPresent | kabi::kPageIsSwapped, 0,
                              true};
// ... but private (COW) copies are reported, never protected (see the header).
constexpr Query kPrivateCopies{kabi::kPageIsFile, kabi::kPageIsWritten | kabi::kPageIsFile,
                               kabi::kPageIsPresent | kabi::kPageIsSwapped, false};

// The kernel VMAs (pieces of them) inside `v`. One PAGEMAP_SCAN never spans
// two VMAs: when a later VMA of the range is not registered, the kernel has
// already re-protected the earlier ones when it fails with EPERM, and their
// written pages would be lost.
std::vector<Range> kernel_pieces(const std::vector<proc::MapEntry>& maps,
                                 const image::VmaRecord& v);

class Scanner {
 public:
  // `keep_huge`: protecting anonymous memory leaves PMD-mapped huge pages
  // unprotected (dirty/huge_blocks.hpp).
  Scanner(int pagemap, std::vector<kabi::page_region>& buf, bool keep_huge = false)
      : fd_(pagemap), buf_(buf), keep_huge_(keep_huge) {}

  // Protects the written pages of private anonymous memory in [start,
  // end), appending them to `out`. Keeping huge pages, what reads as written
  // is listed first, huge or not, and only then are the small pages
  // protected: a huge page split or small pages collapsed into one (by
  // khugepaged, which runs while the target is stopped) between two scans
  // that each looked at one kind would be seen by neither.
  int protect_anon(uint64_t start, uint64_t end, std::vector<Range>* out) {
    if (!keep_huge_) return scan(start, end, kWritten, out);
    if (out)
      if (int e = scan(start, end, kWrittenKeep, out)) return e;
    return scan(start, end, kWrittenSmall, out);
  }

  // Appends the pages of [start, end) matching `q`; 0 or a negative errno
  // (-EPERM: not registered with an async write-protect userfaultfd). After
  // a failure part of the range may already be re-protected: callers then
  // report all of it.
  int scan(uint64_t start, uint64_t end, const Query& q, std::vector<Range>* out) {
    uint64_t pos = start;
    while (pos < end) {
      kabi::pm_scan_arg a{};
      a.size = sizeof a;
      a.flags = kabi::kScanCheckWpAsync | (q.protect ? kabi::kScanWpMatching : 0);
      a.start = pos;
      a.end = end;
      a.vec = reinterpret_cast<uint64_t>(buf_.data());
      a.vec_len = buf_.size();
      a.category_inverted = q.inverted;
      a.category_mask = q.mask;
      a.category_anyof_mask = q.anyof;
      a.return_mask = kabi::kPageIsWritten;
      long n = ::ioctl(fd_, kabi::kPagemapScan, &a);
      if (n < 0) return -errno;
      for (long i = 0; i < n && out; ++i)
        mem::append_range(*out, buf_[i].start, buf_[i].end - buf_[i].start);
      // The walk_end quirk: past 512 regions walk_end may stop short of where
      // the walk got to. A buffer that did not fill means the walk finished;
      // otherwise resume after both walk_end and the last region returned.
      if (size_t(n) < buf_.size()) break;
      uint64_t next = std::max<uint64_t>(a.walk_end, buf_[n - 1].end);
      if (next <= pos) return -EIO;  // no progress: never loop forever
      pos = next;
    }
    return 0;
  }

  // 0 when the VMA holding `addr` is registered with an async write-protect
  // userfaultfd, -EPERM when not. Looks at one page and changes nothing.
  int registered(uint64_t addr) {
    kabi::page_region r;
    kabi::pm_scan_arg a{};
    a.size = sizeof a;
    a.flags = kabi::kScanCheckWpAsync;
    a.start = addr;
    a.end = addr + kPage;
    a.vec = reinterpret_cast<uint64_t>(&r);
    a.vec_len = 1;
    a.category_mask = kabi::kPageIsWritten;
    a.return_mask = kabi::kPageIsWritten;
    return ::ioctl(fd_, kabi::kPagemapScan, &a) < 0 ? -errno : 0;
  }

  // Protects a VMA piece; appends what was written since the last time.
  int protect(Kind kind, Range r, std::vector<Range>* written) {
    if (kind == Kind::kAnon) return protect_anon(r.addr, r.end(), written);
    for (const Query* q : {&kWrittenFilePages, &kEmptyEntries, &kPrivateCopies}) {
      if (!q->protect && !written) continue;
      if (int e = scan(r.addr, r.end(), *q, written)) return e;
    }
    return 0;
  }

 private:
  int fd_;
  std::vector<kabi::page_region>& buf_;
  bool keep_huge_;
};

}  // namespace ckpt::dirty
