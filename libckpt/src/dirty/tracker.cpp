#include "dirty/tracker.hpp"

#include "dirty/kmod.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dirty/soft_dirty.hpp"

namespace ckpt::dirty {

std::unique_ptr<Tracker> make_tracker(const std::string& name) {
  if (name == "kmod") return std::make_unique<KmodTracker>();
  if (name == "pagemap-scan") return std::make_unique<PagemapScanTracker>();
  if (name == "soft-dirty") return std::make_unique<SoftDirtyTracker>();
  return nullptr;
}

}  // namespace ckpt::dirty
