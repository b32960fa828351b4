// The one input of the planners that reads files: sizes and dirty rates of a
// real checkpoint chain, so a plan uses this job's own figures.
#include <ckpt/plan.hpp>

#include "image/chain.hpp"
#include "image/store.hpp"

namespace ckpt::plan {

Result<ChainFigures> chain_figures(const std::string& dir) {
  CKPT_ASSIGN(auto gens, image::list_generations(dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + dir);
  CKPT_ASSIGN(image::Chain chain, image::open_chain(dir, gens.back()));
  ChainFigures f;
  f.generations = chain.links.size();
  f.incrementals = f.generations - 1;
  double incr_bytes = 0, incr_pages = 0, span_ns = 0;
  for (size_t i = 0; i < chain.links.size(); ++i) {
    const image::SnapshotReader& r = *chain.links[i];
    uint64_t pages = 0;
    for (const auto& run : r.runs()) pages += run.npages;
    if (r.meta().parent_generation == 0) {
      f.full_content_bytes = r.content_bytes();
      f.full_pages = pages;
      continue;
    }
    // links are newest first: i + 1 is this generation's parent.
    double dt = double(r.meta().created_unix_ns - chain.links[i + 1]->meta().created_unix_ns);
    if (dt <= 0)
      return make_error(EBADMSG, "generation " + std::to_string(r.meta().generation) +
                                     " is not younger than its parent: no dirty rate");
    incr_bytes += double(r.content_bytes());
    incr_pages += double(pages);
    span_ns += dt;
  }
  f.resident_bytes = image::plan_chain(chain).pages_written * image::kPageSize;
  if (f.incrementals) {
    f.mean_incremental_content_bytes = incr_bytes / double(f.incrementals);
    f.mean_incremental_pages = incr_pages / double(f.incrementals);
    f.mean_interval_s = span_ns / 1e9 / double(f.incrementals);
    f.dirty_pages_per_s = incr_pages / (span_ns / 1e9);
    f.dirty_bytes_per_s = f.dirty_pages_per_s * double(image::kPageSize);
  }
  return f;
}

}  // namespace ckpt::plan
