// A chain of generations: a full checkpoint and the incrementals on top of
// it, each naming its parent. Restoring generation N reads N first, then its
// parent, ... back to the full ("reverse scan"), taking each page from the
// newest generation that has it, and only pages the restored layout still has.
#pragma once

#include <functional>

#include <ckpt/result.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "image/reader.hpp"

namespace ckpt::image {

// Generation N and its ancestors, newest first (the last one is the full).
struct Chain {
  std::vector<std::unique_ptr<SnapshotReader>> links;
  const ImageMeta& newest() const { return links.front()->meta(); }
};
Result<Chain> open_chain(const std::string& dir, uint64_t generation);
// The same for one member of a job: `files_dir(g)` is where that member's
// three files are in generation g (image/job_image.hpp: member_dir).
Result<Chain> open_chain(const std::string& dir, uint64_t generation,
                         const std::function<std::string(uint64_t)>& files_dir);

// Where one slice of the restored address space comes from.
struct PlanSlice {
  uint64_t vaddr = 0;
  uint32_t npages = 0;
  uint32_t link = 0;             // index into Chain::links
  const PageRun* run = nullptr;  // the run holding the content
  uint32_t first_page = 0;       // offset of vaddr inside the run, in pages
  bool zero() const { return run->zero(); }
};

struct RestorePlan {
  std::vector<PlanSlice> slices;          // ascending vaddr, disjoint
  std::vector<const PageRun*> runs_used;  // every run at least one slice reads
  uint64_t pages_written = 0;             // pages the plan takes
  uint64_t pages_skipped = 0;             // superseded by a newer generation or no longer mapped
};

// Builds the reverse-scan plan. `links` newest first; `complete[i]` are the
// ranges generation i describes entirely (pages it does not hold there are
// empty, so older generations are not consulted); `layouts[i]` generation
// i's mappings, layouts[0] the restored layout. Whatever generation i did not
// have mapped is resolved once i is scanned: content there in the restored
// state was created after i, so it is in a newer generation or fresh.
RestorePlan plan_reverse_scan(const std::vector<const std::vector<PageRun>*>& links,
                              const std::vector<std::vector<MemRange>>& complete,
                              const std::vector<const std::vector<VmaRecord>*>& layouts);

// The plan for restoring the newest generation of `chain`.
RestorePlan plan_chain(const Chain& chain);

}  // namespace ckpt::image
