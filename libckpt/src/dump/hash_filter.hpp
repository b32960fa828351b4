// The content-hash tracker: every populated page is read and hashed; only
// pages whose hash differs from the previous generation's table (or that are
// new) are written. Works on any kernel; costs a full read, not a full write.
#pragma once

#include <ckpt/result.hpp>
#include <vector>

#include "dump/memory.hpp"
#include "image/model.hpp"
#include "image/writer.hpp"

namespace ckpt::dump {

class HashFilter {
 public:
  // `prev`: the previous generation's table (empty for a full checkpoint:
  // then every page passes).
  HashFilter(const std::vector<image::PageHash>& prev, image::SnapshotWriter& writer)
      : prev_(prev), writer_(writer) {}

  // The PageSink: hashes each page, writes the changed ones.
  Status add(uint64_t vaddr, const uint8_t* data, size_t npages);
  // Pages the previous generation had that are gone now (dropped by
  // MADV_DONTNEED, replaced by a new mapping) but whose address is still
  // mapped become `complete` ranges: restore leaves them as freshly mapped
  // (zero, or the file's content) instead of bringing older content back.
  // Then hands the new table to the writer.
  void finish(const std::vector<image::VmaRecord>& vmas, std::vector<image::MemRange>* complete);

  uint64_t pages_unchanged() const { return unchanged_; }

 private:
  const std::vector<image::PageHash>& prev_;
  image::SnapshotWriter& writer_;
  std::vector<image::PageHash> now_;
  size_t cursor_ = 0;  // into prev_, pages arrive in ascending order
  uint64_t unchanged_ = 0;
};

}  // namespace ckpt::dump
