#include "cr_plan_levels.hpp"

#include <ckpt/plan.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "common/cli.hpp"
#include "common/units.hpp"
#include "cr_run/state.hpp"

namespace cr_plan {

namespace {

constexpr const char* kTool = "cr_plan";

// "a,b,c": three figures, each parsed by `parse`; false on anything else.
template <typename Parse>
bool three(const std::string& text, Parse parse, double out[3]) {
  std::stringstream in(text);
  std::string item;
  int n = 0;
  while (std::getline(in, item, ',')) {
    if (n == 3) return false;
    auto v = parse(item);
    if (!v) return false;
    out[n++] = *v;
  }
  return n == 3;
}

std::optional<double> number(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end) return std::nullopt;
  return v;
}

std::string fmt(double v, const char* f = "%.4g") {
  return ckpt::cli::format_figure(v, f);
}

// "one", "2nd", "3rd", "9th", "11th", "21st".
std::string every(uint64_t n) {
  if (n == 1) return "one";
  const uint64_t tens = n % 100, units = n % 10;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : units == 1               ? "st"
                       : units == 2               ? "nd"
                       : units == 3               ? "rd"
                                                  : "th";
  return std::to_string(n) + suffix;
}

// C and R per level from the costs a cr_run job recorded in DIR; R of a
// level it was never restored from is that level's C. "" or an error.
std::string measured(const std::string& dir, ckpt::plan::LevelsInput& in, nlohmann::json& from) {
  auto st = cr_run::load(dir);
  if (!st.ok()) return st.error().message;
  const char* names[3] = {"local", "partner", "shared"};
  from = {{"dir", dir}};
  for (int i = 0; i < 3; ++i) {
    auto c = st->checkpoint_costs.find(names[i]);
    if (c == st->checkpoint_costs.end() || c->second.n == 0)
      return dir + ": the job measured no checkpoint to the " + names[i] +
             " level (cr_run --local and --partner record them): give --C";
    in.checkpoint_s[i] = c->second.mean() + (i > 0 ? in.checkpoint_s[0] : 0);
    from["checkpoints"][names[i]] = {{"n", c->second.n}, {"mean_s", c->second.mean()}};
  }
  for (int i = 0; i < 3; ++i) {
    auto r = st->restore_costs.find(names[i]);
    const bool have = r != st->restore_costs.end() && r->second.n > 0;
    in.restart_s[i] = have ? r->second.mean() : in.checkpoint_s[i];
    if (have) from["restores"][names[i]] = {{"n", r->second.n}, {"mean_s", r->second.mean()}};
  }
  return "";
}

}  // namespace

void add_levels_options(CLI::App* sub, LevelsArgs& a) {
  sub->add_option("--C", a.C, "checkpoint times to the local, partner and shared level: C0,C1,C2");
  sub->add_option("--from", a.from,
                  "a cr_run directory with --local and --partner: C and R as that job measured "
                  "them (C1, C2: the local checkpoint plus the copy's time to that level)");
  sub->add_option("--R", a.R, "restart times from each level: R0,R1,R2 (default: the C)");
  sub->add_option("--mtbf", a.mtbf, "the job's MTBF, all failures")->required();
  sub->add_option("--mix", a.mix,
                  "shares of failures each level recovers from: p0,p1,p2 (default "
                  "0.138,0.784,0.078, production logs: policy.md)");
  sub->add_flag("--json", a.json, "machine-readable output");
}

int run_levels(const LevelsArgs& a) {
  ckpt::plan::LevelsInput in;
  nlohmann::json from;
  if (!a.from.empty()) {
    std::string err = measured(a.from, in, from);
    if (!err.empty()) return ckpt::cli::fail(kTool, err);
  } else if (a.C.empty()) {
    return ckpt::cli::usage_error(kTool, "need --C C0,C1,C2 or --from DIR");
  }
  if (!a.C.empty() && !three(a.C, ckpt::cli::parse_duration, in.checkpoint_s))
    return ckpt::cli::usage_error(kTool, "--C: not three times C0,C1,C2: " + a.C);
  if (a.from.empty())
    for (int i = 0; i < 3; ++i) in.restart_s[i] = in.checkpoint_s[i];
  if (!a.R.empty() && !three(a.R, ckpt::cli::parse_duration, in.restart_s))
    return ckpt::cli::usage_error(kTool, "--R: not three times R0,R1,R2: " + a.R);
  auto m = ckpt::cli::parse_duration(a.mtbf);
  if (!m) return ckpt::cli::usage_error(kTool, "--mtbf: not a time: " + a.mtbf);
  in.mtbf_s = *m;
  if (!a.mix.empty() && !three(a.mix, number, in.share))
    return ckpt::cli::usage_error(kTool, "--mix: not three shares p0,p1,p2: " + a.mix);
  auto p = ckpt::plan::plan_levels(in);
  if (!p.ok()) return ckpt::cli::fail(kTool, p.error());
  const uint64_t n1 = p->per_next[0], n2 = p->per_next[1];
  if (a.json) {
    nlohmann::json out = {
        {"command", "levels"},
        {"inputs",
         {{"C", {in.checkpoint_s[0], in.checkpoint_s[1], in.checkpoint_s[2]}},
          {"R", {in.restart_s[0], in.restart_s[1], in.restart_s[2]}},
          {"mtbf_s", in.mtbf_s},
          {"mix", {in.share[0], in.share[1], in.share[2]}},
          {"from", from}}},
        {"levels",
         {{"period_s", {p->period_s[0], p->period_s[1], p->period_s[2]}},
          {"local_per_partner", n1},
          {"partner_per_shared", n2},
          {"waste", p->waste}}},
        {"single", {{"period_s", p->single_period_s}, {"waste", p->single_waste}}}};
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  if (!from.is_null())
    std::printf("measured by the job in %s: C %s, %s, %s s; R %s, %s, %s s\n", a.from.c_str(),
                fmt(in.checkpoint_s[0]).c_str(), fmt(in.checkpoint_s[1]).c_str(),
                fmt(in.checkpoint_s[2]).c_str(), fmt(in.restart_s[0]).c_str(),
                fmt(in.restart_s[1]).c_str(), fmt(in.restart_s[2]).c_str());
  std::printf("three levels: a checkpoint every %s s; every %s reaches the partner (every %s s),\n",
              fmt(p->period_s[0]).c_str(), every(n1).c_str(), fmt(p->period_s[1]).c_str());
  std::printf("  every %s of those the shared storage (every %s s)\n", every(n2).c_str(),
              fmt(p->period_s[2]).c_str());
  std::printf("  expected waste %s %% (checkpoints, lost work, restarts)\n",
              fmt(100 * p->waste, "%.2f").c_str());
  std::printf("shared storage only: a checkpoint every %s s, waste %s %%\n",
              fmt(p->single_period_s).c_str(), fmt(100 * p->single_waste, "%.2f").c_str());
  return 0;
}

}  // namespace cr_plan
