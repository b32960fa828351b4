// What the pagemap-scan tracker's incrementals keep of the pages they read:
// only those whose content differs from the parent generation's.
//
// Pages of a block left unprotected by adaptive tracking (dirty/adaptive.hpp)
// all read as written, whether the program wrote them or not. So every page
// an incremental reads is hashed (xxh3, on the writer thread, after the
// release), and a page whose hash equals the one the parent generation's
// table holds for it is not written: its content at this generation is the
// content the chain already restores there. Every page read, kept or not,
// goes into this generation's table, so the next incremental can judge it
// the same way; a page without an entry (not read by the parent: tracked and
// not written, or empty then) is always kept.
//
// Why the parent's entry is the chain's content for that page: a full
// records every page it saves; an incremental records only pages it read,
// each with the content read, which it either saved or found equal to the
// parent's entry (the same argument, one generation back). A page the
// parent did not read has no entry, however old its content.
//
// Per 2 MiB block it also counts the pages read and the pages found changed:
// the ground truth that tells adaptive tracking which unprotected blocks the
// program really wrote in the interval just checkpointed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "dirty/tracker.hpp"
#include "image/model.hpp"
#include "image/writer.hpp"

namespace ckpt::dirty {

struct BlockContent {
  uint32_t read = 0;     // pages of the block read for this generation
  uint32_t changed = 0;  // ... whose content differs from the parent's entry (or has none)
};
// By the block's 2 MiB-aligned first address.
using BlockContentMap = std::map<uint64_t, BlockContent>;

class ChangedPagesFilter : public ContentFilter {
 public:
  // `prev`: the parent generation's table (sorted by address; empty: every
  // page is kept). `done` is called by finish() with the per-block counts.
  ChangedPagesFilter(const std::vector<image::PageHash>& prev, image::SnapshotWriter& writer,
                     std::function<void(const BlockContentMap&)> done)
      : prev_(prev), writer_(writer), done_(std::move(done)) {}

  Status add(uint64_t vaddr, const uint8_t* data, size_t npages) override;
  // Hands the table of every page read to the writer, then reports the
  // counts. `complete` is left as it is: the tracker planned those ranges.
  void finish(const std::vector<image::VmaRecord>& vmas,
              std::vector<image::MemRange>* complete) override;

  uint64_t pages_unchanged() const override { return unchanged_; }
  const BlockContentMap& blocks() const { return blocks_; }

 private:
  const std::vector<image::PageHash>& prev_;
  image::SnapshotWriter& writer_;
  std::function<void(const BlockContentMap&)> done_;
  std::vector<image::PageHash> now_;
  BlockContentMap blocks_;
  size_t cursor_ = 0;  // into prev_: pages arrive in ascending order
  uint64_t unchanged_ = 0;
};

}  // namespace ckpt::dirty
