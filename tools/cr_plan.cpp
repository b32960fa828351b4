// cr_plan interval|incrementals|migrate|spares: checkpoint policy from the
// formulas of docs/policy.md, with figures from flags, from a real chain
// (--from DIR) and from the tools' own --json statistics (--stats FILE).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "ckpt/plan.hpp"
#include "common/cli.hpp"
#include "common/units.hpp"
#include "cr_plan_levels.hpp"

namespace {

using nlohmann::json;
namespace plan = ckpt::plan;

constexpr const char* kTool = "cr_plan";

using ckpt::cli::parse_bytes;
using ckpt::cli::parse_duration;

// A figure and where it came from ("flag", "chain", "stats").
struct Figure {
  std::optional<double> value;
  std::string source;
};

struct Inputs {
  std::map<std::string, std::string> flags;  // option name -> text as given
  std::map<std::string, Figure> measured;
  std::string error;

  // A time: the flag wins over a measurement; missing -> nullopt.
  std::optional<double> time(const std::string& name, Figure* out = nullptr) {
    return get(name, parse_duration, out);
  }
  std::optional<double> bytes(const std::string& name, Figure* out = nullptr) {
    return get(name, parse_bytes, out);
  }
  std::optional<double> number(const std::string& name, Figure* out = nullptr) {
    auto plain = [](const std::string& s) -> std::optional<double> {
      size_t used = 0;
      try {
        double v = std::stod(s, &used);
        if (used == s.size()) return v;
      } catch (...) {
      }
      return std::nullopt;
    };
    return get(name, plain, out);
  }

  template <class F>
  std::optional<double> get(const std::string& name, F parse, Figure* out) {
    if (auto f = flags.find(name); f != flags.end() && !f->second.empty()) {
      auto v = parse(f->second);
      if (!v && error.empty()) error = "--" + name + ": cannot read \"" + f->second + "\"";
      if (out) *out = {v, "flag"};
      return v;
    }
    if (auto m = measured.find(name); m != measured.end()) {
      if (out) *out = m->second;
      return m->second.value;
    }
    return std::nullopt;
  }
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

// --stats FILE: the JSON lines cr_full, cr_incr and cr_restart print with --json.
std::string read_stats(const std::string& path, Inputs& in, json& from) {
  std::ifstream f(path);
  if (!f) return "cannot open " + path;
  std::vector<double> full, incr, rf, rfi;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return path + " line " + std::to_string(n) + ": not a JSON object";
    if (j.contains("total_seconds") && j.contains("kind")) {
      (j["kind"] == "full" ? full : incr).push_back(j["total_seconds"].get<double>());
    } else if (j.contains("restore_seconds") && j.contains("generations_read")) {
      // A job's restore reads each generation once per process.
      uint64_t procs = j.value("processes", uint64_t(1));
      uint64_t g = j["generations_read"].get<uint64_t>() / std::max<uint64_t>(procs, 1);
      if (g == 1) rf.push_back(j["restore_seconds"].get<double>());
      if (g == 2) rfi.push_back(j["restore_seconds"].get<double>());
    }
  }
  // A checkpoint's cost is its total time (the target is stopped only for
  // the frozen part, but the writing competes with it): an upper bound.
  auto put = [&](const char* name, const std::vector<double>& v) {
    if (v.empty()) return;
    in.measured[name] = {mean(v), "stats"};
    from[name] = {{"value", mean(v)}, {"samples", v.size()}};
  };
  put("C", full);
  put("Of", full);
  put("Oi", incr);
  put("R", rf);
  put("Rf", rf);
  put("Rfi", rfi);
  return "";
}

std::string read_chain(const std::string& dir, Inputs& in, json& from) {
  auto f = plan::chain_figures(dir);
  if (!f.ok()) return f.error().message;
  from = {{"generations", f->generations},
          {"incrementals", f->incrementals},
          {"full_content_bytes", f->full_content_bytes},
          {"mean_incremental_content_bytes", f->mean_incremental_content_bytes},
          {"resident_bytes", f->resident_bytes},
          {"mean_interval_s", f->mean_interval_s},
          {"dirty_pages_per_s", f->dirty_pages_per_s}};
  in.measured["resident"] = {double(f->resident_bytes), "chain"};
  if (f->incrementals) {
    in.measured["dirty-rate"] = {f->dirty_bytes_per_s, "chain"};
    in.measured["interval"] = {f->mean_interval_s, "chain"};
  }
  return "";
}

// A figure the plan needs and nobody gave: name what would provide it.
std::string missing(const std::string& flag, const std::string& what, bool from_chain,
                    const std::string& stats_hint) {
  std::string s = "need --" + flag + " (" + what + ")";
  if (from_chain) s += ": the chain records no " + what;
  if (!stats_hint.empty()) s += "; " + stats_hint + " in --stats would give it";
  return s;
}

std::string fmt(double v, const char* f = "%.4g") {
  return ckpt::cli::format_figure(v, f);
}

struct Common {
  bool json_out = false;
  std::string from, stats;
};

// Fills `in.measured` from --from/--stats; "" or an error.
std::string load(const Common& c, Inputs& in, json& out) {
  if (!c.from.empty()) {
    json j;
    if (auto e = read_chain(c.from, in, j); !e.empty()) return e;
    out["chain"] = j;
  }
  if (!c.stats.empty()) {
    json j = json::object();
    if (auto e = read_stats(c.stats, in, j); !e.empty()) return e;
    out["stats"] = j;
  }
  return "";
}

// The platform MTBF from --mtbf, or --node-mtbf and --nodes.
std::optional<double> mtbf(Inputs& in, std::string& err) {
  auto m = in.time("mtbf");
  auto node = in.time("node-mtbf");
  auto nodes = in.number("nodes");
  if (!in.error.empty()) return std::nullopt;
  if (m && (node || nodes)) {
    err = "give --mtbf or --node-mtbf with --nodes, not both";
    return std::nullopt;
  }
  if (m) return m;
  if (!node || !nodes) {
    err = "need --mtbf, or --node-mtbf and --nodes";
    return std::nullopt;
  }
  auto r = plan::platform_mtbf(*node, *nodes);
  if (!r.ok()) {
    err = r.error().message;
    return std::nullopt;
  }
  return *r;
}

int run_interval(const Common& c, Inputs& in) {
  json out = {{"command", "interval"}};
  if (auto e = load(c, in, out); !e.empty()) return ckpt::cli::fail(kTool, e);
  std::string err;
  plan::IntervalInput p;
  Figure cf, rf;
  auto C = in.time("C", &cf), R = in.time("R", &rf);
  auto M = mtbf(in, err);
  if (!in.error.empty()) return ckpt::cli::fail(kTool, in.error);
  if (!C)
    return ckpt::cli::fail(
        kTool, missing("C", "checkpoint time", !c.from.empty(), "a cr_full --json line"));
  if (!M) return ckpt::cli::fail(kTool, err);
  // No R measured or given: a chain gives an estimate; without a chain the
  // plan is Young/Daly's alone, which does not use R.
  json r_in = nullptr;
  std::string r_label;
  if (!R && !c.from.empty()) {
    auto e = plan::estimate_restart(c.from);
    if (!e.ok()) return ckpt::cli::fail(kTool, "estimating R: " + e.error().message);
    R = e->restart_s;
    rf.source = "estimate";
    r_in = {{"value", *R},
            {"source", "estimate"},
            {"restore_bytes", e->restore_bytes},
            {"sampled_bytes", e->sampled_bytes},
            {"read_bytes_per_s", e->read_bytes_per_s}};
    r_label = "R = " + fmt(*R) + " s is an ESTIMATE (no restart measured): " +
              fmt(double(e->restore_bytes) / (1 << 20), "%.1f") +
              " MiB a restore of the chain writes, at " +
              fmt(e->read_bytes_per_s / (1 << 20), "%.0f") +
              " MiB/s, this machine's speed reading and checking the chain's pages now; --R or "
              "a cr_restart --json line in --stats gives a measured one";
  } else if (R) {
    r_in = {{"value", *R}, {"source", rf.source}};
  }
  p.checkpoint_s = *C;
  p.restart_s = R.value_or(0);
  p.restart_known = R.has_value();
  p.mtbf_s = *M;
  p.verify_s = in.time("V").value_or(0);
  p.silent_mtbf_s = in.time("silent-mtbf").value_or(0);
  p.predicted = in.number("predicted").value_or(0);
  if (!in.error.empty()) return ckpt::cli::fail(kTool, in.error);
  auto r = plan::plan_interval(p);
  if (!r.ok()) return ckpt::cli::fail(kTool, r.error());
  out["inputs"] = {{"C", {{"value", *C}, {"source", cf.source}}},
                   {"R", r_in},
                   {"mtbf_s", p.mtbf_s},
                   {"V", p.verify_s},
                   {"silent_mtbf_s", p.silent_mtbf_s},
                   {"predicted", p.predicted}};
  out["young_daly"] = {{"period_s", r->young_daly_period_s},
                       {"overhead", r->young_daly_overhead},
                       {"exact_overhead_at_period", r->exact_overhead_at_young_daly}};
  if (r->exact_computed) {
    out["exact"] = {{"period_s", r->exact_period_s}, {"overhead", r->exact_overhead}};
    out["period_difference"] = r->period_difference;
    out["overhead_difference"] = r->overhead_difference;
    out["first_order_ok"] = r->first_order_ok;
  } else {
    out["young_daly"].erase("exact_overhead_at_period");
    out["exact"] = nullptr;
    out["omitted"] = {"exact", "young_daly.exact_overhead_at_period", "period_difference",
                      "overhead_difference", "first_order_ok"};
  }
  out["note"] = r->note;
  if (!r_label.empty()) out["estimated"] = {"R"};
  if (c.json_out) {
    ckpt::cli::print_json(out);
    return 0;
  }
  if (!r_label.empty()) std::printf("%s\n", r_label.c_str());
  std::printf("platform MTBF %s s, effective failure rate %s /s\n", fmt(p.mtbf_s).c_str(),
              fmt(r->lambda).c_str());
  if (!r->exact_computed) {
    std::printf("Young/Daly: T* = %s s, H* = %s %%\n", fmt(r->young_daly_period_s, "%.1f").c_str(),
                fmt(100 * r->young_daly_overhead, "%.3g").c_str());
    std::printf(
        "omitted: the exact E(T), and what T* costs exactly: they need --R (restart time)\n");
    return 0;
  }
  std::printf("Young/Daly: T* = %s s, H* = %s %% (exactly %s %% at T*)\n",
              fmt(r->young_daly_period_s, "%.1f").c_str(),
              fmt(100 * r->young_daly_overhead, "%.3g").c_str(),
              fmt(100 * r->exact_overhead_at_young_daly, "%.3g").c_str());
  std::printf("exact E(T): T = %s s, H = %s %%\n", fmt(r->exact_period_s, "%.1f").c_str(),
              fmt(100 * r->exact_overhead, "%.3g").c_str());
  std::printf("difference: period %+.1f %%, overhead %+.1f %%%s\n", 100 * r->period_difference,
              100 * r->overhead_difference, r->first_order_ok ? " (first order holds)" : "");
  if (!r->note.empty()) std::printf("%s\n", r->note.c_str());
  return 0;
}

int run_incrementals(const Common& c, Inputs& in, int64_t n) {
  json out = {{"command", "incrementals"}};
  if (auto e = load(c, in, out); !e.empty()) return ckpt::cli::fail(kTool, e);
  std::string err;
  Figure sources[5];
  auto Of = in.time("Of", &sources[0]), Oi = in.time("Oi", &sources[1]),
       Rf = in.time("Rf", &sources[2]), Rfi = in.time("Rfi", &sources[3]);
  auto interval = in.time("interval", &sources[4]);
  auto M = mtbf(in, err);
  if (!in.error.empty()) return ckpt::cli::fail(kTool, in.error);
  bool chain = !c.from.empty();
  if (!Of)
    return ckpt::cli::fail(kTool,
                           missing("Of", "full checkpoint time", chain, "a cr_full --json line"));
  if (!Oi)
    return ckpt::cli::fail(
        kTool, missing("Oi", "incremental checkpoint time", chain, "a cr_incr --json line"));
  if (!Rf)
    return ckpt::cli::fail(kTool, missing("Rf", "restart time from a full", chain,
                                          "a cr_restart --json line of a full"));
  if (!Rfi)
    return ckpt::cli::fail(kTool, missing("Rfi", "restart time from a full and an incremental",
                                          chain, "a cr_restart --json line reading 2 generations"));
  if (!M) return ckpt::cli::fail(kTool, err);
  plan::IncrementalInput p{*Of, *Oi, *Rf, *Rfi, *M, interval.value_or(0)};
  auto r = plan::plan_incrementals(p);
  if (!r.ok()) return ckpt::cli::fail(kTool, r.error());
  const char* names[5] = {"Of", "Oi", "Rf", "Rfi", "interval"};
  json inputs = {{"mtbf_s", p.mtbf_s}};
  for (int i = 0; i < 5; ++i)
    if (sources[i].value)
      inputs[names[i]] = {{"value", *sources[i].value}, {"source", sources[i].source}};
  out["inputs"] = inputs;
  out["mu"] = r->mu;
  out["delta_s"] = r->delta_s;
  out["interval_s"] = r->interval_s;
  out["failure_probability"] = r->failure_probability;
  out["incrementals"] = r->incrementals;
  out["savings_s"] = r->savings_s;
  out["note"] = r->note;
  double sn = 0;
  if (n >= 0) {
    // S_n with the restart from a full plus n incrementals taken as R_f + n*delta.
    sn = plan::savings(n, *Of, *Oi, *Rf, *Rf + double(n) * r->delta_s);
    out["savings_n"] = {{"n", n}, {"savings_s", sn}};
  }
  if (c.json_out) {
    ckpt::cli::print_json(out);
    return 0;
  }
  std::printf("mu = O_i/O_f = %s, delta = %s s, interval %s s, P_i = %s\n", fmt(r->mu).c_str(),
              fmt(r->delta_s).c_str(), fmt(r->interval_s, "%.1f").c_str(),
              fmt(r->failure_probability).c_str());
  if (r->incrementals < 0)
    std::printf("incrementals per full: no limit\n");
  else
    std::printf("incrementals per full: %lld (saves %s s per full cycle)\n",
                (long long)r->incrementals, fmt(r->savings_s, "%.2f").c_str());
  if (n >= 0) std::printf("S_%lld = %s s\n", (long long)n, fmt(sn, "%.2f").c_str());
  if (!r->note.empty()) std::printf("%s\n", r->note.c_str());
  return 0;
}

int run_migrate(const Common& c, Inputs& in) {
  json out = {{"command", "migrate"}};
  if (auto e = load(c, in, out); !e.empty()) return ckpt::cli::fail(kTool, e);
  auto lead = in.time("lead");
  auto remaining = in.time("remaining");
  if (!in.error.empty()) return ckpt::cli::fail(kTool, in.error);
  if (!lead && !remaining)
    return ckpt::cli::fail(kTool, "need --lead (migrate away) or --remaining (migrate back)");
  std::string text;
  if (lead) {
    Figure df, rs;
    auto dirty = in.bytes("dirty-rate", &df), resident = in.bytes("resident", &rs);
    auto bw = in.bytes("bandwidth"), R = in.time("R");
    if (!in.error.empty()) return ckpt::cli::fail(kTool, in.error);
    bool chain = !c.from.empty();
    if (!dirty)
      return ckpt::cli::fail(kTool, chain ? "need --dirty-rate: the chain has no incremental to "
                                            "measure it from"
                                          : "need --dirty-rate (bytes/s) or --from DIR");
    if (!resident) return ckpt::cli::fail(kTool, "need --resident (bytes) or --from DIR");
    if (!bw) return ckpt::cli::fail(kTool, "need --bandwidth (bytes/s)");
    if (!R)
      return ckpt::cli::fail(
          kTool, missing("R", "restart time", chain, "a cr_restart --json line of a full"));
    plan::MigrateInput p;
    p.lead_s = *lead;
    p.dirty_bytes_per_s = *dirty;
    p.resident_bytes = *resident;
    p.bandwidth_bytes_per_s = *bw;
    p.restart_s = *R;
    auto r = plan::plan_migration(p);
    if (!r.ok()) return ckpt::cli::fail(kTool, r.error());
    json rounds = json::array();
    for (const auto& x : r->rounds) rounds.push_back({{"bytes", x.bytes}, {"seconds", x.seconds}});
    out["inputs"] = {{"lead_s", p.lead_s},
                     {"dirty_bytes_per_s", {{"value", p.dirty_bytes_per_s}, {"source", df.source}}},
                     {"resident_bytes", {{"value", p.resident_bytes}, {"source", rs.source}}},
                     {"bandwidth_bytes_per_s", p.bandwidth_bytes_per_s},
                     {"restart_s", p.restart_s}};
    out["mode"] = plan::mode_name(r->mode);
    out["reason"] = r->reason;
    out["live"] = {{"seconds", r->live_seconds},
                   {"downtime_s", r->live_downtime_s},
                   {"stop_reason", r->stop_reason},
                   {"rounds", rounds}};
    out["frozen"] = {{"seconds", r->frozen_seconds}};
    text += std::string("mode ") + plan::mode_name(r->mode) + ": " + r->reason + "\n";
    text += "live: " + fmt(r->live_seconds, "%.3g") + " s in " + std::to_string(r->rounds.size()) +
            " rounds (" + r->stop_reason + "), down " + fmt(r->live_downtime_s, "%.3g") +
            " s; frozen: " + fmt(r->frozen_seconds, "%.3g") + " s\n";
  }
  if (remaining) {
    auto deg = in.time("degraded"), orig = in.time("original"), mig = in.time("migration-time");
    if (!in.error.empty()) return ckpt::cli::fail(kTool, in.error);
    if (!deg || !orig || !mig)
      return ckpt::cli::fail(kTool,
                             "--remaining needs --degraded, --original and --migration-time");
    auto b = plan::plan_back_migration(*remaining, *deg, *orig, *mig);
    if (!b.ok()) return ckpt::cli::fail(kTool, b.error());
    out["back"] = {{"migrate_back", b->migrate_back}, {"gain_s", b->gain_s}};
    text += std::string("migrate back: ") + (b->migrate_back ? "yes" : "no") + " (gain " +
            fmt(b->gain_s, "%.3g") + " s)\n";
  }
  if (c.json_out)
    ckpt::cli::print_json(out);
  else
    std::fputs(text.c_str(), stdout);
  return 0;
}

std::optional<plan::Coords> parse_coords(const std::string& s) {
  plan::Coords c;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, s.find('x') != std::string::npos ? 'x' : ',')) {
    try {
      size_t used = 0;
      int v = std::stoi(part, &used);
      if (used != part.size()) return std::nullopt;
      c.push_back(v);
    } catch (...) {
      return std::nullopt;
    }
  }
  if (c.empty()) return std::nullopt;
  return c;
}

std::string coords_text(const plan::Coords& c) {
  std::string s;
  for (size_t i = 0; i < c.size(); ++i) s += (i ? "," : "") + std::to_string(c[i]);
  return s;
}

struct SpareArgs {
  double nodes = 0;
  int q = 0;
  std::string shape, method = "hybrid";
  int r = -1, s = 1;
  std::vector<std::string> fails;
  bool map = false, torus = false;
};

int run_spares(const Common& c, const SpareArgs& a) {
  plan::Mesh mesh;
  if (!a.shape.empty()) {
    auto dims = parse_coords(a.shape);
    if (!dims) return ckpt::cli::fail(kTool, "--shape: cannot read \"" + a.shape + "\"");
    mesh.dims = *dims;
  } else {
    if (a.nodes <= 0 || a.q <= 0)
      return ckpt::cli::fail(kTool, "need --shape, or --nodes and --dims");
    double n = std::round(std::pow(a.nodes, 1.0 / a.q));
    if (std::pow(n, a.q) != a.nodes)
      return ckpt::cli::fail(kTool, fmt(a.nodes, "%.0f") + " nodes are not a " +
                                        std::to_string(a.q) + "-D cube: give --shape");
    mesh.dims.assign(size_t(a.q), int(n));
  }
  mesh.spare_dims = a.r < 0 ? int(mesh.dims.size()) : a.r;
  mesh.thickness = a.s;
  if (auto st = plan::check_mesh(mesh); !st.ok()) return ckpt::cli::fail(kTool, st.error());
  uint64_t total = plan::mesh_nodes(mesh), spares = plan::mesh_spares(mesh);
  json out = {{"command", "spares"},
              {"shape", mesh.dims},
              {"spare_dims", mesh.spare_dims},
              {"thickness", mesh.thickness},
              {"nodes", total},
              {"spares", spares},
              {"fraction", double(spares) / double(total)}};
  bool cube = true;
  for (int d : mesh.dims) cube = cube && d == mesh.dims[0];
  if (cube) {  // the closed formula applies; it must agree with the count
    auto f =
        plan::spare_fraction(double(total), int(mesh.dims.size()), mesh.spare_dims, mesh.thickness);
    if (f.ok()) out["fraction_formula"] = *f;
  }
  std::string text = std::to_string(total) + " nodes (" + coords_text(mesh.dims) + "), " +
                     std::to_string(spares) + " spares (" +
                     fmt(100.0 * double(spares) / double(total), "%.2f") + " %), " +
                     std::to_string(total - spares) + " ranks\n";
  if (!a.fails.empty()) {
    plan::Slide how = a.method == "0d"   ? plan::Slide::Zero
                      : a.method == "1d" ? plan::Slide::One
                      : a.method == "qd" ? plan::Slide::Q
                                         : plan::Slide::Hybrid;
    auto map = plan::RankMap::create(mesh);
    if (!map.ok()) return ckpt::cli::fail(kTool, map.error());
    json subs = json::array();
    for (const auto& f : a.fails) {
      auto cf = parse_coords(f);
      if (!cf) return ckpt::cli::fail(kTool, "--fail: cannot read \"" + f + "\"");
      auto s = map->fail(*cf, how);
      if (!s.ok()) return ckpt::cli::fail(kTool, "node " + f + ": " + s.error().message);
      json moves = json::array();
      for (const auto& m : s->moves)
        moves.push_back({{"rank", m.rank}, {"from", m.from}, {"to", m.to}});
      subs.push_back({{"failed", s->failed},
                      {"method", s->method},
                      {"dimension", s->dimension},
                      {"moves", moves}});
      text += "node " + coords_text(s->failed) + " failed: " + s->method;
      if (s->dimension >= 0) text += " along dimension " + std::to_string(s->dimension);
      text += ", " + std::to_string(s->moves.size()) + " rank(s) moved\n";
      for (const auto& m : s->moves)
        text += "  rank " + std::to_string(m.rank) + ": " + coords_text(m.from) + " -> " +
                coords_text(m.to) + "\n";
    }
    int64_t f = int64_t(a.fails.size());
    out["substitutions"] = subs;
    out["max_neighbour_hops"] = map->max_neighbour_hops();
    int64_t coll = plan::worst_collisions(how, f, a.torus);
    if (coll >= 0) out["worst_collisions"] = coll;
    text += "largest distance between neighbouring ranks: " +
            std::to_string(map->max_neighbour_hops()) + " hops";
    if (coll >= 0)
      text += "; worst-case message collisions (" + a.method + "): " + std::to_string(coll);
    text += "\n";
    if (a.map) {
      json m = json::array();
      for (uint64_t r = 0; r < map->ranks(); ++r) m.push_back(map->node_of(int64_t(r)));
      out["map"] = m;
      for (uint64_t r = 0; r < map->ranks(); ++r)
        text += std::to_string(r) + " " + coords_text(map->node_of(int64_t(r))) + "\n";
    }
  }
  if (c.json_out)
    ckpt::cli::print_json(out);
  else
    std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Checkpoint policy: how often to checkpoint, how many incrementals per full, live or\n"
      "frozen migration or pause, spare nodes, multi-level checkpoints. Times in seconds or with a "
      "unit (90s, 2min,\n"
      "1.25h, 1d, 100y); sizes in bytes or with a unit (125M, 4Gi). Formulas: docs/policy.md."};
  app.require_subcommand(1);
  Common c;
  Inputs in;
  auto common = [&](CLI::App* sub) {
    sub->add_flag("--json", c.json_out, "machine-readable output");
  };
  auto measured = [&](CLI::App* sub) {
    sub->add_option("--from", c.from,
                    "checkpoint directory: resident size, dirty rate and interval of its chain");
    sub->add_option("--stats", c.stats,
                    "file of cr_full/cr_incr/cr_restart --json lines: measured C, O_f, O_i, R_f, "
                    "R_(f+i)");
  };
  auto opt = [&](CLI::App* sub, const std::string& name, const std::string& help) {
    sub->add_option("--" + name, in.flags[name], help);
  };
  auto platform = [&](CLI::App* sub) {
    opt(sub, "mtbf", "platform MTBF");
    opt(sub, "node-mtbf", "one node's MTBF (with --nodes: M = node MTBF / nodes)");
    opt(sub, "nodes", "number of nodes");
  };

  auto* interval = app.add_subcommand("interval", "checkpoint period: Young/Daly and exact E(T)");
  opt(interval, "C", "checkpoint time");
  opt(interval, "R", "restart time");
  platform(interval);
  opt(interval, "V", "verification time (silent errors)");
  opt(interval, "silent-mtbf", "MTBF of silent errors");
  opt(interval, "predicted", "fraction p of failures predicted and avoided by migration, [0, 1)");
  common(interval);
  measured(interval);

  int64_t n = -1;
  auto* incr = app.add_subcommand("incrementals", "incremental checkpoints per full");
  opt(incr, "Of", "full checkpoint time O_f");
  opt(incr, "Oi", "incremental checkpoint time O_i");
  opt(incr, "Rf", "restart time from a full R_f");
  opt(incr, "Rfi", "restart time from a full and one incremental R_(f+i)");
  platform(incr);
  opt(incr, "interval", "time between checkpoints (default: the chain's, else Young/Daly of O_f)");
  incr->add_option("--n", n, "also print the savings S_n of n incrementals");
  common(incr);
  measured(incr);

  auto* mig = app.add_subcommand(
      "migrate", "live, frozen or pause before a predicted failure; back migration");
  opt(mig, "lead", "warning lead time before the failure");
  opt(mig, "dirty-rate", "bytes written per second (default: the chain's)");
  opt(mig, "resident", "resident memory in bytes (default: the chain's)");
  opt(mig, "bandwidth", "link bandwidth in bytes per second");
  opt(mig, "R", "restart time at the destination");
  opt(mig, "remaining", "back migration: run time still to go");
  opt(mig, "degraded", "back migration: time of the work on the degraded node (T_degraded)");
  opt(mig, "original", "back migration: time of the same work on the repaired node (T_original)");
  opt(mig, "migration-time", "back migration: what migrating back costs");
  common(mig);
  measured(mig);

  SpareArgs sa;
  auto* sp =
      app.add_subcommand("spares", "spare nodes of a q-D mesh and the substitute of failed ones");
  sp->add_option("--nodes", sa.nodes, "number of nodes (an n^q cube)");
  sp->add_option("--dims", sa.q, "number of dimensions q (with --nodes)");
  sp->add_option("--shape", sa.shape, "the mesh's sides instead, e.g. 24x24x24");
  sp->add_option("--spare-dims", sa.r, "r: dimensions that keep a spare slab (default: all)");
  sp->add_option("--thickness", sa.s, "s: the slab's thickness (default 1)");
  sp->add_option("--fail", sa.fails,
                 "coordinates of a failed node, e.g. 3,4,5 (repeatable, in order)");
  sp->add_option("--method", sa.method, "0d, 1d, qd, or hybrid (qD, then 1D, then 0D)")
      ->check(CLI::IsMember({"0d", "1d", "qd", "hybrid"}));
  sp->add_flag("--map", sa.map, "print the whole rank-to-node map");
  sp->add_flag("--torus", sa.torus, "the network is a torus (collision bound)");
  common(sp);

  cr_plan::LevelsArgs la;
  auto* lv = app.add_subcommand("levels",
                                "multi-level checkpoints: period and local/partner/shared ratios");
  cr_plan::add_levels_options(lv, la);

  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (*lv) return cr_plan::run_levels(la);
  if (*interval) return run_interval(c, in);
  if (*incr) return run_incrementals(c, in, n);
  if (*mig) return run_migrate(c, in);
  return run_spares(c, sa);
}
