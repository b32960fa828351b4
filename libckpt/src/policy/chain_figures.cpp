// The one input of the planners that reads files: sizes and dirty rates of a
// real checkpoint chain, so a plan uses this job's own figures. A job of
// several processes (cr_full --tree) adds up its members' figures.
#include <ckpt/ckpt.hpp>
#include <ckpt/plan.hpp>

#include "image/chain.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/store.hpp"
#include "util/clock.hpp"

namespace ckpt::plan {

namespace {

// One process's chain; rates and sizes of several processes add up.
Result<ChainFigures> member_figures(const image::Chain& chain) {
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

}  // namespace

Result<ChainFigures> chain_figures(const std::string& given) {
  CKPT_ASSIGN(const std::string dir, resolve_checkpoint_dir(given));
  CKPT_ASSIGN(auto gens, image::list_generations(dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + dir);
  const uint64_t newest = gens.back();
  CKPT_ASSIGN(image::JobMeta job, image::read_job_or_root(image::generation_dir(dir, newest)));
  ChainFigures sum;
  bool first = true;
  for (const image::JobMember& m : job.members) {
    if (m.zombie()) continue;  // no memory
    const pid_t root = job.members[0].pid;
    auto files = [&](uint64_t g) {
      return image::member_dir(image::generation_dir(dir, g), m.pid, root);
    };
    auto chain = image::open_chain(dir, newest, files);
    if (!chain.ok()) return chain.error().context("process " + std::to_string(m.pid));
    CKPT_ASSIGN(ChainFigures f, member_figures(*chain));
    if (first) {  // the job's generations and interval are its root's
      sum.generations = f.generations;
      sum.incrementals = f.incrementals;
      sum.mean_interval_s = f.mean_interval_s;
      first = false;
    }
    sum.full_content_bytes += f.full_content_bytes;
    sum.full_pages += f.full_pages;
    sum.mean_incremental_content_bytes += f.mean_incremental_content_bytes;
    sum.mean_incremental_pages += f.mean_incremental_pages;
    sum.resident_bytes += f.resident_bytes;
    sum.dirty_pages_per_s += f.dirty_pages_per_s;
    sum.dirty_bytes_per_s += f.dirty_bytes_per_s;
  }
  return sum;
}

Result<RestartEstimate> estimate_restart(const std::string& given) {
  constexpr uint64_t kSampleBytes = 256ull << 20;
  CKPT_ASSIGN(const std::string dir, resolve_checkpoint_dir(given));
  CKPT_ASSIGN(ChainFigures f, chain_figures(dir));
  CKPT_ASSIGN(auto gens, image::list_generations(dir));
  CKPT_ASSIGN(image::Chain chain, image::open_chain(dir, gens.back()));
  RestartEstimate e;
  e.restore_bytes = f.resident_bytes;
  // Newest first, as a restore reads: the runs it reads first.
  const double t0 = now_seconds();
  for (const auto& link : chain.links)
    for (const image::PageRun& run : link->runs()) {
      if (run.zero() || e.sampled_bytes >= kSampleBytes) continue;
      CKPT_TRY(link->verify_run(run));
      e.sampled_bytes += run.bytes();
    }
  const double seconds = now_seconds() - t0;
  if (e.sampled_bytes == 0 || seconds <= 0)
    return make_error(ENODATA, "the chain in " + dir + " holds no page content to time a read of");
  e.read_bytes_per_s = double(e.sampled_bytes) / seconds;
  e.restart_s = double(e.restore_bytes) / e.read_bytes_per_s;
  return e;
}

}  // namespace ckpt::plan
