#include <ckpt/tracker.hpp>

namespace ckpt {

const std::vector<TrackerInfo>& tracker_kinds() {
  static const std::vector<TrackerInfo> kinds = {
      {TrackerKind::kmod, "kmod", true, "the ckpt_dirty module's shadow PTE dirty bits"},
      {TrackerKind::pagemap_scan, "pagemap-scan", true,
       "PAGEMAP_SCAN with userfaultfd write-protection"},
      {TrackerKind::soft_dirty, "soft-dirty", true, "the kernel's soft-dirty PTE bits"},
      {TrackerKind::hash, "hash", false, "xxh3 of every page: works on any kernel"},
  };
  return kinds;
}

const TrackerInfo* find_tracker(std::string_view name) {
  for (const TrackerInfo& t : tracker_kinds())
    if (name == t.name) return &t;
  return nullptr;
}

std::vector<std::string> tracker_choices() {
  std::vector<std::string> out{"auto"};
  for (const TrackerInfo& t : tracker_kinds()) out.emplace_back(t.name);
  return out;
}

}  // namespace ckpt
