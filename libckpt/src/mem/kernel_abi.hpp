// Kernel interfaces newer than Debian 12's uapi headers (6.1): PAGEMAP_SCAN
// (Linux 6.7) and userfaultfd asynchronous write-protect. Defined here when
// the installed headers lack them; whether the running kernel has them is
// probed at run time.
#pragma once

#include <linux/fs.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

#include <cstdint>

namespace ckpt::kabi {

struct page_region {
  uint64_t start, end, categories;
};

struct pm_scan_arg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

constexpr unsigned long kPagemapScan = _IOWR('f', 16, pm_scan_arg);

// Page categories of PAGEMAP_SCAN.
constexpr uint64_t kPageIsWpAllowed = 1 << 0;
constexpr uint64_t kPageIsWritten = 1 << 1;
constexpr uint64_t kPageIsFile = 1 << 2;
constexpr uint64_t kPageIsPresent = 1 << 3;
constexpr uint64_t kPageIsSwapped = 1 << 4;
constexpr uint64_t kPageIsPfnZero = 1 << 5;
constexpr uint64_t kPageIsHuge = 1 << 6;
constexpr uint64_t kPageIsSoftDirty = 1 << 7;

// PAGEMAP_SCAN flags.
constexpr uint64_t kScanWpMatching = 1 << 0;
constexpr uint64_t kScanCheckWpAsync = 1 << 1;

// userfaultfd features and flags.
constexpr uint64_t kUffdFeatureWpUnpopulated = 1ull << 13;
constexpr uint64_t kUffdFeatureWpAsync = 1ull << 15;
constexpr int kUffdUserModeOnly = 1;

// /proc/PID/pagemap bits.
constexpr uint64_t kPmPresent = 1ull << 63;
constexpr uint64_t kPmSwapped = 1ull << 62;
constexpr uint64_t kPmFileOrShared = 1ull << 61;
constexpr uint64_t kPmSoftDirty = 1ull << 55;
// A swap-type entry that holds no page, e.g. the uffd-wp marker that write
// protection with WP_UNPOPULATED leaves on a page never populated: pagemap
// calls it swapped. Its swap type (bits 0-4, shown to CAP_SYS_ADMIN) is the
// highest, SWP_PTE_MARKER = 31 (6.1 and 6.18 alike); without the capability
// the bits read 0 and the entry is taken for a real swapped page.
constexpr bool pm_is_marker(uint64_t e) {
  return (e & kPmSwapped) && !(e & kPmPresent) && (e & 0x1f) == 31;
}

}  // namespace ckpt::kabi
