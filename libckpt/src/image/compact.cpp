// cr_compact: fold a job's chain into a synthetic full checkpoint, offline.
// Every member's chain is folded into its files of one new generation,
// bound bottom-up as a checkpoint binds them (job.img holds the other
// members' digests, the root's metadata job.img's), committed as a whole.
#include <sys/random.h>

#include <ckpt/ckpt.hpp>
#include <set>

#include "image/chain.hpp"
#include "image/format.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "util/clock.hpp"
#include "util/zeros.hpp"

namespace ckpt {

static_assert(kZeroBytes >= image::kMaxRunPages * image::kPageSize, "zero runs fit");

using image::kPageSize;

namespace {

// One member's chain, folded into `writer`: every page as a restore reads
// it, each run verified before any of it is written.
Status fold(const image::Chain& chain, image::SnapshotWriter& writer, CompactStats* stats) {
  const image::RestorePlan plan = image::plan_chain(chain);
  std::set<const image::PageRun*> verified;
  for (const image::PlanSlice& sl : plan.slices) {
    const image::SnapshotReader& src = *chain.links[sl.link];
    if (!sl.zero() && verified.insert(sl.run).second) CKPT_TRY(src.verify_run(*sl.run));
    const uint8_t* data =
        sl.zero() ? zero_bytes() : src.content(*sl.run) + uint64_t(sl.first_page) * kPageSize;
    CKPT_TRY(writer.add_pages(sl.vaddr, data, sl.npages));
  }
  writer.set_page_hashes(chain.links.front()->page_hashes());
  stats->pages_skipped += plan.pages_skipped;
  return {};
}

// The newest state of a member's metadata, as a full of the new chain.
image::ImageMeta as_full(const image::Chain& chain, uint64_t generation,
                         const std::array<uint8_t, 16>& chain_id) {
  image::ImageMeta meta = chain.newest();
  meta.generation = generation;
  meta.parent_generation = 0;
  meta.chain_id = chain_id;
  meta.link = {};  // a new chain: no parent to bind
  meta.complete.clear();
  return meta;
}

}  // namespace

Result<CompactStats> compact_chain(const std::string& given) {
  CKPT_ASSIGN(const std::string dir, resolve_checkpoint_dir(given));
  const double t0 = now_seconds();
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + dir);
  const uint64_t newest = gens.back(), generation = newest + 1;
  CKPT_ASSIGN(image::JobMeta job, image::read_job_or_root(image::generation_dir(dir, newest)));
  const pid_t root = job.members[0].pid;

  // Every live member's chain, as a restore reads it.
  std::vector<image::Chain> chains;
  std::vector<size_t> live;  // member index of chains[k]
  for (size_t i = 0; i < job.members.size(); ++i) {
    const image::JobMember& m = job.members[i];
    if (m.zombie()) continue;
    CKPT_ASSIGN(image::Chain chain, image::open_chain(dir, newest, [&](uint64_t g) {
                  return image::member_dir(image::generation_dir(dir, g), m.pid, root);
                }));
    chains.push_back(std::move(chain));
    live.push_back(i);
  }
  CompactStats stats;
  for (const image::Chain& c : chains)
    stats.generations_folded = std::max<uint64_t>(stats.generations_folded, c.links.size());
  if (stats.generations_folded <= 1)
    return make_error(EINVAL, "generation " + std::to_string(newest) +
                                  " is already a full checkpoint: nothing to compact");

  std::array<uint8_t, 16> chain_id{};
  if (::getrandom(chain_id.data(), chain_id.size(), 0) != ssize_t(chain_id.size()))
    return sys_error("getrandom");
  CKPT_ASSIGN(auto gen, image::GenerationWriter::create(dir, generation));
  job.generation = generation;
  job.chain_id = chain_id;
  // Bottom-up: the other members first, their digests into job.img, then
  // job.img, whose digest the root's metadata binds, then the root.
  for (size_t k = chains.size(); k-- > 0;) {
    const pid_t pid = job.members[live[k]].pid;
    CKPT_ASSIGN(auto writer, image::SnapshotWriter::create_in(
                                 image::member_dir(gen->path(), pid, root), generation, chain_id));
    CKPT_TRY(fold(chains[k], *writer, &stats));
    image::ImageMeta meta = as_full(chains[k], generation, chain_id);
    if (k == 0) {
      meta.link.binds_job = true;
      CKPT_TRY(image::write_job_file(gen->path(), job, true, &meta.link.job_digest));
    }
    CKPT_TRY(writer->commit(meta));
    if (k != 0) job.members[live[k]].meta_digest = writer->meta_digest();
    stats.pages_written += writer->pages();
    stats.bytes_written += writer->bytes_total();
  }
  CKPT_TRY(gen->commit(true));
  image::remove_generations_before(dir, generation);
  stats.generation = generation;
  stats.seconds = now_seconds() - t0;
  return stats;
}

}  // namespace ckpt
