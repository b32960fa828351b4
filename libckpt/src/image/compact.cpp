// cr_compact: fold a chain into a synthetic full checkpoint, offline.
#include <sys/random.h>

#include <set>

#include <ckpt/ckpt.hpp>

#include "image/chain.hpp"
#include "image/format.hpp"
#include "image/generation_dir.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "util/clock.hpp"
#include "util/zeros.hpp"

namespace ckpt {

static_assert(kZeroBytes >= image::kMaxRunPages * image::kPageSize, "zero runs fit");

using image::kPageSize;

Result<CompactStats> compact_chain(const std::string& given) {
  CKPT_ASSIGN(const std::string dir, resolve_checkpoint_dir(given));
  const double t0 = now_seconds();
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + dir);
  CKPT_TRY(image::single_process_only(image::generation_dir(dir, gens.back()), "cr_compact"));
  CKPT_ASSIGN(image::Chain chain, image::open_chain(dir, gens.back()));
  CompactStats stats;
  stats.generations_folded = chain.links.size();
  if (chain.links.size() == 1)
    return make_error(EINVAL, "generation " + std::to_string(gens.back()) +
                                  " is already a full checkpoint: nothing to compact");

  const image::RestorePlan plan = image::plan_chain(chain);

  // The newest state's metadata, as a full checkpoint starting a new chain.
  image::ImageMeta meta = chain.newest();
  meta.generation = gens.back() + 1;
  meta.parent_generation = 0;
  meta.link = {};              // a new chain: no parent to bind
  meta.link.binds_job = true;  // a single process, written without job.img
  meta.complete.clear();
  if (::getrandom(meta.chain_id.data(), meta.chain_id.size(), 0) != ssize_t(meta.chain_id.size()))
    return sys_error("getrandom");

  CKPT_ASSIGN(auto writer, image::SnapshotWriter::create(dir, meta.generation, meta.chain_id));
  std::set<const image::PageRun*> verified;
  Status st;
  for (const image::PlanSlice& sl : plan.slices) {
    const image::SnapshotReader& src = *chain.links[sl.link];
    if (!sl.zero() && verified.insert(sl.run).second) {
      st = src.verify_run(*sl.run);  // nothing unverified goes into the new full
      if (!st.ok()) break;
    }
    const uint8_t* data =
        sl.zero() ? zero_bytes() : src.content(*sl.run) + uint64_t(sl.first_page) * kPageSize;
    st = writer->add_pages(sl.vaddr, data, sl.npages);
    if (!st.ok()) break;
  }
  if (!st.ok()) return st.error();
  writer->set_page_hashes(chain.links.front()->page_hashes());
  CKPT_TRY(writer->commit(meta));
  image::remove_generations_before(dir, meta.generation);

  stats.generation = meta.generation;
  stats.pages_written = writer->pages();
  stats.pages_skipped = plan.pages_skipped;
  stats.bytes_written = writer->bytes_total();
  stats.seconds = now_seconds() - t0;
  return stats;
}

}  // namespace ckpt
