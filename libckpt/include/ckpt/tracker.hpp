// The dirty-page trackers as one list: the tools' --tracker options,
// cr_check and the C API (ckpt_tracker_name) all read it, so a tracker is
// added in one place.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ckpt {

enum class TrackerKind { kmod, pagemap_scan, soft_dirty, hash };

struct TrackerInfo {
  TrackerKind kind;
  const char* name;  // as options, images and statistics spell it
  // Kernel-assisted: learns of writes as they happen (what pre-copy rounds
  // need) and may keep state in or for the process (cr_untrack removes it).
  // Otherwise pages are judged by their content, read in full each time.
  bool kernel;
  const char* summary;  // one line, for cr_check
};

// How a chain's tracker works, where it has a choice (pagemap-scan only;
// the others ignore it). The defaults are what docs/performance.md measures.
struct TrackingOptions {
  // 2 MiB blocks the program rewrites every interval are left unprotected
  // (no write fault per page), and what an incremental saves of them is
  // kept to the pages whose content changed (docs/performance.md,
  // "Adaptive tracking"). false: every written page is protected again
  // after each collect.
  bool adaptive = true;
  // PMD-mapped huge pages stay unprotected unless they were quiet (a
  // protected huge page splits on its first write).
  bool keep_huge_pages = true;
};

// Every tracker, best first: "auto" picks the first one this kernel
// supports; the last, hash, works everywhere.
const std::vector<TrackerInfo>& tracker_kinds();
// nullptr when there is no tracker of that name.
const TrackerInfo* find_tracker(std::string_view name);
// What --tracker accepts: "auto", then every name.
std::vector<std::string> tracker_choices();
// The tracker "auto" picks on this kernel: the first whose probe passes.
const TrackerInfo& auto_tracker();

}  // namespace ckpt
