#include "dirty/tracker.hpp"

#include "dirty/hash.hpp"
#include "dirty/kmod.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dirty/soft_dirty.hpp"

namespace ckpt::dirty {

const TrackerInfo& Tracker::info() const {
  for (const TrackerInfo& t : tracker_kinds())
    if (t.kind == kind()) return t;
  return tracker_kinds().back();  // unreachable: every kind is listed
}

std::unique_ptr<Tracker> make_tracker(TrackerKind kind, const TrackingOptions& opts) {
  switch (kind) {
    case TrackerKind::kmod:
      return std::make_unique<KmodTracker>();
    case TrackerKind::pagemap_scan:
      return std::make_unique<PagemapScanTracker>(PagemapScanTracker::Options::from(opts));
    case TrackerKind::soft_dirty:
      return std::make_unique<SoftDirtyTracker>();
    case TrackerKind::hash:
      return std::make_unique<HashTracker>();
  }
  return nullptr;
}

std::unique_ptr<Tracker> make_tracker(const std::string& name, const TrackingOptions& opts) {
  const TrackerInfo* t = find_tracker(name);
  return t ? make_tracker(t->kind, opts) : nullptr;
}

}  // namespace ckpt::dirty

namespace ckpt {

const TrackerInfo& auto_tracker() {
  for (const TrackerInfo& t : tracker_kinds())
    if (dirty::probe_tracker(t.kind).ok) return t;
  return tracker_kinds().back();  // hash: always usable
}

}  // namespace ckpt

namespace ckpt::dirty {

FeatureCheck probe_tracker(TrackerKind kind) {
  switch (kind) {
    case TrackerKind::kmod:
      return KmodTracker::probe();
    case TrackerKind::pagemap_scan:
      return PagemapScanTracker::probe();
    case TrackerKind::soft_dirty:
      return SoftDirtyTracker::probe();
    case TrackerKind::hash:
      break;
  }
  const TrackerInfo* t = find_tracker("hash");
  return {t->name, true, t->summary};
}

}  // namespace ckpt::dirty
