// The content-hash tracker: nothing is kept in or for the process. Every
// populated page is read and hashed; only pages whose hash differs from the
// previous generation's table (or that are new) are written. Works on any
// kernel; costs a full read each time, not a full write.
#pragma once

#include <ckpt/result.hpp>
#include <vector>

#include "dirty/tracker.hpp"
#include "image/model.hpp"
#include "image/writer.hpp"

namespace ckpt::dirty {

class HashTracker : public Tracker {
 public:
  TrackerKind kind() const override { return TrackerKind::hash; }
  Status arm(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state) override;
  Result<DirtySet> collect(pid_t pid, const std::vector<image::VmaRecord>& vmas,
                           const std::vector<image::VmaRecord>& prev, TrackerState* state) override;
  std::unique_ptr<ContentFilter> filter(const std::vector<image::PageHash>& prev,
                                        image::SnapshotWriter& writer) override;
};

class HashFilter : public ContentFilter {
 public:
  // `prev`: the previous generation's table (empty for a full checkpoint:
  // then every page passes).
  HashFilter(const std::vector<image::PageHash>& prev, image::SnapshotWriter& writer)
      : prev_(prev), writer_(writer) {}

  // Hashes each page, writes the changed ones.
  Status add(uint64_t vaddr, const uint8_t* data, size_t npages) override;
  // Pages the previous generation had that are gone now (dropped by
  // MADV_DONTNEED, replaced by a new mapping) but whose address is still
  // mapped become `complete` ranges: restore leaves them as freshly mapped
  // (zero, or the file's content) instead of bringing older content back.
  // Then hands the new table to the writer.
  void finish(const std::vector<image::VmaRecord>& vmas,
              std::vector<image::MemRange>* complete) override;

  uint64_t pages_unchanged() const override { return unchanged_; }

 private:
  const std::vector<image::PageHash>& prev_;
  image::SnapshotWriter& writer_;
  std::vector<image::PageHash> now_;
  size_t cursor_ = 0;  // into prev_, pages arrive in ascending order
  uint64_t unchanged_ = 0;
};

}  // namespace ckpt::dirty
