// ckpt_generations / ckpt_info / ckpt_verify / ckpt_compact / ckpt_untrack:
// a checkpoint directory read, folded, or its tracking ended (the same code
// as cr_info, cr_compact and cr_untrack).
#include "capi/handle.hpp"
#include "image/chain_verify.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"

namespace {

using namespace ckpt::capi;

uint64_t pages_of(const ckpt::image::SnapshotReader& r) {
  uint64_t n = 0;
  for (const auto& run : r.runs()) n += run.npages;
  return n;
}

}  // namespace

extern "C" int ckpt_generations(ckpt_ctx* ctx, const char* dir, uint64_t* gens, size_t* n) {
  return guarded(ctx, "ckpt_generations", [&]() -> int {
    if (int rc = check_ctx(ctx, "ckpt_generations")) return rc;
    if (int rc = check_dir(ctx, dir, "ckpt_generations")) return rc;
    if (!n) return fail(ctx, EINVAL, "ckpt_generations: n is NULL");
    auto chain = ckpt::resolve_checkpoint_dir(dir);
    if (!chain.ok()) return fail(ctx, chain.error());
    auto g = ckpt::image::list_generations(*chain);
    if (!g.ok()) return fail(ctx, g.error());
    size_t room = *n;
    *n = g->size();
    if (g->size() > room || (!gens && !g->empty()))
      return fail(ctx, ERANGE,
                  "ckpt_generations: room for " + std::to_string(room) + ", " + *chain + " holds " +
                      std::to_string(g->size()));
    std::copy(g->begin(), g->end(), gens);
    return ok(ctx);
  });
}

extern "C" int ckpt_info(ckpt_ctx* ctx, const char* given, uint64_t generation,
                         struct ckpt_generation_info* out) {
  return guarded(ctx, "ckpt_info", [&]() -> int {
    if (int rc = check_ctx(ctx, "ckpt_info")) return rc;
    if (int rc = check_dir(ctx, given, "ckpt_info")) return rc;
    if (!out) return fail(ctx, EINVAL, "ckpt_info: info is NULL");
    if (int rc = check_out(ctx, out, "ckpt_generation_info")) return rc;
    auto chain = ckpt::resolve_checkpoint_dir(given);
    if (!chain.ok()) return fail(ctx, chain.error());
    const std::string dir = *chain;
    auto gens = ckpt::image::list_generations(dir);
    if (!gens.ok()) return fail(ctx, gens.error());
    if (gens->empty()) return fail(ctx, ENOENT, std::string("no checkpoint in ") + dir);
    uint64_t g = generation ? generation : gens->back();
    if (std::find(gens->begin(), gens->end(), g) == gens->end())
      return fail(ctx, ENOENT, "no generation " + std::to_string(g) + " in " + dir);
    const std::string gen_dir = ckpt::image::generation_dir(dir, g);
    auto root = ckpt::image::SnapshotReader::open(gen_dir);
    if (!root.ok()) return fail(ctx, root.error());
    auto job = ckpt::image::read_job_or_root(gen_dir);
    if (!job.ok()) return fail(ctx, job.error());

    const auto& m = (*root)->meta();
    ckpt_generation_info s{};
    s.generation = m.generation;
    s.parent_generation = m.parent_generation;
    s.pid = m.process.pid;
    copy_str(s.comm, m.process.comm);
    s.processes = job->members.size();
    s.threads = m.threads.size();
    s.vmas = m.vmas.size();
    s.pages = pages_of(**root);
    s.content_bytes = (*root)->content_bytes();
    s.created_unix_ns = int64_t(m.created_unix_ns);
    for (const ckpt::image::JobMember& mem : job->members) {
      if (mem.zombie() || mem.pid == job->members[0].pid) continue;
      auto r = ckpt::image::SnapshotReader::open(
          ckpt::image::member_dir(gen_dir, mem.pid, job->members[0].pid));
      if (!r.ok()) return fail(ctx, r.error());
      s.pages += pages_of(**r);
      s.content_bytes += (*r)->content_bytes();
    }
    write_out(s, out);
    return ok(ctx);
  });
}

extern "C" int ckpt_verify(ckpt_ctx* ctx, const char* given, uint64_t generation) {
  return guarded(ctx, "ckpt_verify", [&]() -> int {
    if (int rc = check_ctx(ctx, "ckpt_verify")) return rc;
    if (int rc = check_dir(ctx, given, "ckpt_verify")) return rc;
    auto chain = ckpt::resolve_checkpoint_dir(given);
    if (!chain.ok()) return fail(ctx, chain.error());
    auto gens = ckpt::image::list_generations(*chain);
    if (!gens.ok()) return fail(ctx, gens.error());
    if (gens->empty()) return fail(ctx, ENOENT, "no checkpoint in " + *chain);
    // Every member of every generation checked (or of `generation`, which
    // must exist), as cr_info --verify does.
    if (auto v = ckpt::image::verify_chains(*chain, *gens, generation); !v.ok())
      return fail(ctx, v.error());
    return ok(ctx);
  });
}

extern "C" int ckpt_compact(ckpt_ctx* ctx, const char* dir, struct ckpt_compact_stats* out) {
  return guarded(ctx, "ckpt_compact", [&]() -> int {
    if (int rc = check_ctx(ctx, "ckpt_compact")) return rc;
    if (int rc = check_dir(ctx, dir, "ckpt_compact")) return rc;
    if (int rc = check_out(ctx, out, "ckpt_compact_stats")) return rc;
    auto r = ckpt::compact_chain(dir);
    if (!r.ok()) return fail(ctx, r.error());
    ckpt_compact_stats s{};
    s.generation = r->generation;
    s.generations_folded = r->generations_folded;
    s.bytes_written = r->bytes_written;
    s.seconds = r->seconds;
    write_out(s, out);
    return ok(ctx);
  });
}

extern "C" int ckpt_untrack(ckpt_ctx* ctx, const char* dir, struct ckpt_untrack_stats* out) {
  return guarded(ctx, "ckpt_untrack", [&]() -> int {
    if (int rc = check_ctx(ctx, "ckpt_untrack")) return rc;
    if (int rc = check_dir(ctx, dir, "ckpt_untrack")) return rc;
    if (int rc = check_out(ctx, out, "ckpt_untrack_stats")) return rc;
    auto chain = ckpt::resolve_checkpoint_dir(dir);
    if (!chain.ok()) return fail(ctx, chain.error());
    auto r = ckpt::untrack(*chain);
    if (!r.ok()) return fail(ctx, r.error());
    ckpt_untrack_stats s{};
    s.processes = r->processes;
    s.released = r->released;
    copy_str(s.tracker, r->tracker);
    write_out(s, out);
    return ok(ctx);
  });
}
