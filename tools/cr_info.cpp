// cr_info --dir DIR [--chain N] [--generation N] [--verify] [--json] [--maps]:
// describe a checkpoint directory (a chain, or cr_run's directory of chains).
#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "common/cli.hpp"
#include "cr_run/state.hpp"
#include "image/chain_link.hpp"
#include "image/chain_verify.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "nodes/partner.hpp"
#include "util/text.hpp"

namespace {

nlohmann::json describe(const ckpt::image::SnapshotReader& r, bool maps) {
  const auto& m = r.meta();
  uint64_t zero = 0, pages = 0;
  for (const auto& run : r.runs()) {
    pages += run.npages;
    if (run.zero()) zero += run.npages;
  }
  nlohmann::json j = {{"generation", m.generation},
                      {"parent_generation", m.parent_generation},
                      {"kind", m.parent_generation ? "incremental" : "full"},
                      {"pid", m.process.pid},
                      {"comm", m.process.comm},
                      {"exe", m.mm.exe_path},
                      {"kernel", m.kernel_release},
                      {"created_unix_ns", m.created_unix_ns},
                      {"threads", m.threads.size()},
                      {"files", m.files.size()},
                      {"vmas", m.vmas.size()},
                      {"pages", pages},
                      {"pages_zero", zero},
                      {"content_bytes", r.content_bytes()}};
  if (maps) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& v : m.vmas)
      list.push_back({{"start", ckpt::hex(v.start, false)},
                      {"end", ckpt::hex(v.end, false)},
                      {"prot", v.prot},
                      {"flags", v.flags},
                      {"name", v.name}});
    j["maps"] = list;
    nlohmann::json threads = nlohmann::json::array();
    for (const auto& t : m.threads) {
      // user_regs_struct word indexes: rax 10, rip 16, orig_rax 15, rsp 19.
      threads.push_back({{"tid", t.tid},
                         {"rip", ckpt::hex(t.gpregs[16], false)},
                         {"rsp", ckpt::hex(t.gpregs[19], false)},
                         {"rax", int64_t(t.gpregs[10])},
                         {"orig_rax", int64_t(t.gpregs[15])},
                         {"sigmask", ckpt::hex(t.sigmask, false)},
                         {"pending_signal", t.pending_signal},
                         {"xstate_bytes", t.xstate.size()}});
    }
    j["thread_state"] = threads;
  }
  return j;
}

// The chains of cr_run's directory `given` ([] when it is a chain itself),
// listed on stdout unless `json`; `shown` is the one described below.
nlohmann::json list_chains(const std::string& given, const std::string& shown, bool json) {
  nlohmann::json out = nlohmann::json::array();
  if (shown == given) return out;
  for (uint64_t c : ckpt::run_chains(given)) {
    const std::string d = ckpt::run_chain_dir(given, c);
    auto g = ckpt::image::list_generations(d);
    nlohmann::json gens = g.ok() ? nlohmann::json(*g) : nlohmann::json::array();
    out.push_back({{"chain", c}, {"dir", d}, {"generations", gens}, {"shown", d == shown}});
    if (json) continue;
    std::printf("chain %llu: %s, ", (unsigned long long)c, d.c_str());
    if (!g.ok() || g->empty())
      std::printf("no committed generation");
    else
      std::printf("%zu generation%s (%llu to %llu)", g->size(), g->size() == 1 ? "" : "s",
                  (unsigned long long)g->front(), (unsigned long long)g->back());
    std::printf("%s\n", d == shown ? ", described below" : "");
  }
  return out;
}

// What cr_run's partner level holds, asked from the partner's agent; an
// agent that cannot be asked is shown as such (the level has a gap).
nlohmann::json describe_partner(const cr_run::Schedule& s, bool json) {
  ckpt::nodes::Partner p;
  p.addr = s.partner;
  p.token_file = s.partner_token;
  p.part = s.partner_name;
  p.timeout = 5;
  nlohmann::json out = {{"addr", p.addr}, {"name", p.part}};
  auto h = ckpt::nodes::partner_holds(p);
  if (!h.ok()) {
    out["error"] = h.error().message;
    if (!json)
      std::printf("the partner level, %s: cannot be asked: %s\n", p.addr.c_str(),
                  h.error().message.c_str());
    return out;
  }
  out["chain"] = h->chain;
  out["generation"] = h->generation;
  if (json) return out;
  if (h->chain == 0)
    std::printf("the partner level, %s: holds nothing of %s\n", p.addr.c_str(), p.part.c_str());
  else
    std::printf("the partner level, %s: chain %llu, generations 1 to %llu\n", p.addr.c_str(),
                (unsigned long long)h->chain, (unsigned long long)h->generation);
  return out;
}

// With cr_run --local, the chains listed first are the shared level; the
// local level's, and what the partner holds, follow.
void describe_other_levels(const cr_run::State& st, bool json, nlohmann::json* local_level,
                           nlohmann::json* partner_level) {
  const std::string& local = st.schedule.local_dir;
  if (!json)
    std::printf("the chains above are the shared level; the local level, %s:\n", local.c_str());
  *local_level = {{"dir", local}, {"chains", list_chains(local, "", json)}};
  if (!json && (*local_level)["chains"].empty()) std::printf("no chain\n");
  if (!st.schedule.partner.empty()) *partner_level = describe_partner(st.schedule, json);
}

// cr_run's directory with levels whose shared level holds no generation.
int describe_levels_only(const std::string& given, const cr_run::State& st, bool json) {
  nlohmann::json chains = list_chains(given, "", json);
  if (!json && chains.empty()) std::printf("no chain on the shared level yet\n");
  nlohmann::json local_level, partner_level;
  describe_other_levels(st, json, &local_level, &partner_level);
  if (!json) return 0;
  nlohmann::json j = {{"run_dir", given},
                      {"chains", chains},
                      {"generations", nlohmann::json::array()},
                      {"local_level", local_level}};
  if (!partner_level.is_null()) j["partner_level"] = partner_level;
  ckpt::cli::print_json(j);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Describe the checkpoints in a directory; --verify checks every checksum."};
  std::string given;
  uint64_t generation = 0, chain = 0;
  bool json = false, verify = false, maps = false;
  app.add_option("--dir", given, "checkpoint directory (a chain, or cr_run's directory of chains)")
      ->required();
  app.add_option("--chain", chain, "a directory of chains: this chain (default: the newest)");
  app.add_option("--generation", generation, "only this generation");
  app.add_flag("--verify", verify, "check every checksum (exit 1 on any mismatch)");
  app.add_flag("--json", json, "machine-readable output");
  app.add_flag("--maps", maps, "list the memory mappings of each generation");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;

  auto resolved = ckpt::resolve_checkpoint_dir(given, chain);
  auto gens = resolved.ok() ? ckpt::image::list_generations(*resolved)
                            : ckpt::Result<std::vector<uint64_t>>(resolved.error());
  // cr_run's levels whose shared level has nothing yet: the other levels
  // are still worth showing (a copy on its way, or one that keeps failing).
  if ((!gens.ok() || gens->empty()) && chain == 0)
    if (auto st = cr_run::load(given); st.ok() && !st->schedule.local_dir.empty())
      return describe_levels_only(given, *st, json);
  if (!resolved.ok()) return ckpt::cli::fail("cr_info", resolved.error());
  const std::string dir = *resolved;
  if (!gens.ok()) return ckpt::cli::fail("cr_info", gens.error());
  if (gens->empty()) return ckpt::cli::fail("cr_info", "no checkpoint in " + dir);
  if (generation && std::find(gens->begin(), gens->end(), generation) == gens->end())
    return ckpt::cli::fail("cr_info", "no generation " + std::to_string(generation) + " in " + dir);
  // The whole chain a restore would read, every member: links, missing
  // parents, job.img, content.
  if (verify)
    if (auto v = ckpt::image::verify_chains(dir, *gens, generation); !v.ok())
      return ckpt::cli::fail("cr_info", v.error());
  // A directory of chains (cr_run): its chains, then the one described.
  nlohmann::json chains = list_chains(given, dir, json);
  // With cr_run --local, those are the shared level; the local one too.
  nlohmann::json local_level, partner_level;
  if (auto st = cr_run::load(given); st.ok() && !st->schedule.local_dir.empty())
    describe_other_levels(*st, json, &local_level, &partner_level);
  nlohmann::json out = nlohmann::json::array();
  for (uint64_t g : *gens) {
    if (generation && g != generation) continue;
    auto r = ckpt::image::SnapshotReader::open(ckpt::image::generation_dir(dir, g));
    if (!r.ok()) return ckpt::cli::fail("cr_info", r.error());
    nlohmann::json j = describe(**r, maps);
    // The job's members: the root above, the others in their own files.
    const std::string gen_dir = ckpt::image::generation_dir(dir, g);
    auto job = ckpt::image::read_bound_job(**r);
    if (!job.ok()) return ckpt::cli::fail("cr_info", job.error());
    nlohmann::json procs = nlohmann::json::array();
    for (const ckpt::image::JobMember& m : job->members) {
      nlohmann::json p = {{"pid", m.pid},
                          {"ppid", m.ppid},
                          {"pgid", m.pgid},
                          {"sid", m.sid},
                          {"pgid_restored", job->has_member(m.pgid)},
                          {"sid_restored", job->has_member(m.sid)},
                          {"zombie", m.zombie()},
                          {"exit_status", m.exit_status}};
      if (!m.zombie() && m.pid != job->members[0].pid) {
        auto mr = ckpt::image::SnapshotReader::open(
            ckpt::image::member_dir(gen_dir, m.pid, job->members[0].pid));
        if (!mr.ok()) return ckpt::cli::fail("cr_info", mr.error());
        nlohmann::json d = describe(**mr, false);
        p["comm"] = d["comm"];
        p["threads"] = d["threads"];
        p["pages"] = d["pages"];
        p["content_bytes"] = d["content_bytes"];
      } else if (!m.zombie()) {
        p["comm"] = j["comm"];
        p["threads"] = j["threads"];
        p["pages"] = j["pages"];
        p["content_bytes"] = j["content_bytes"];
      }
      procs.push_back(p);
    }
    j["processes"] = procs;
    if (verify) j["verified"] = true;
    if (!json) {
      std::printf(
          "generation %llu (%s): pid %d %s, %zu thread%s, %zu vmas, %llu pages (%llu zero), %.1f "
          "MiB "
          "content%s\n",
          (unsigned long long)g, j["kind"].get<std::string>().c_str(), j["pid"].get<int>(),
          j["comm"].get<std::string>().c_str(), j["threads"].get<size_t>(),
          j["threads"].get<size_t>() == 1 ? "" : "s", j["vmas"].get<size_t>(),
          (unsigned long long)j["pages"].get<uint64_t>(),
          (unsigned long long)j["pages_zero"].get<uint64_t>(),
          double(j["content_bytes"].get<uint64_t>()) / (1 << 20), verify ? ", verified" : "");
      const bool many = procs.size() > 1;
      for (auto& p : procs) {
        const bool root = p["pid"] == procs[0]["pid"];
        const char* outside = root ? " (led outside the checkpoint: a restore joins the restorer's)"
                                   : " (led outside the checkpoint: inherited from its parent)";
        auto id = [&](const char* what, const char* key, const char* restored) {
          std::printf("%s %d%s", what, p[key].get<int>(), p[restored].get<bool>() ? "" : outside);
        };
        if (!many) {
          id("  process group", "pgid", "pgid_restored");
          id(", session", "sid", "sid_restored");
          std::printf("\n");
          continue;
        }
        std::printf("  process %d", p["pid"].get<int>());
        if (p.contains("comm")) std::printf(" (%s)", p["comm"].get<std::string>().c_str());
        std::printf(": parent %d", p["ppid"].get<int>());
        id(", group", "pgid", "pgid_restored");
        id(", session", "sid", "sid_restored");
        if (p["zombie"].get<bool>())
          std::printf(", zombie (wait status %d)", p["exit_status"].get<int>());
        else
          std::printf(", %zu thread%s, %.1f MiB content", p["threads"].get<size_t>(),
                      p["threads"].get<size_t>() == 1 ? "" : "s",
                      double(p["content_bytes"].get<uint64_t>()) / (1 << 20));
        std::printf("\n");
      }
      if (maps)
        for (auto& v : j["maps"])
          std::printf("  %s-%s prot=%d flags=%#x %s\n", v["start"].get<std::string>().c_str(),
                      v["end"].get<std::string>().c_str(), v["prot"].get<int>(),
                      v["flags"].get<unsigned>(), v["name"].get<std::string>().c_str());
    }
    out.push_back(j);
  }
  if (json) {
    nlohmann::json j = {{"dir", dir}, {"generations", out}};
    if (!chains.empty()) {
      j["run_dir"] = given;
      j["chains"] = chains;
    }
    if (!local_level.is_null()) j["local_level"] = local_level;
    if (!partner_level.is_null()) j["partner_level"] = partner_level;
    ckpt::cli::print_json(j);
  }
  return 0;
}
