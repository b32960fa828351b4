// Multi-level checkpoints: how often to checkpoint, and how many node-local
// checkpoints per partner copy and per shared-storage copy (docs/policy.md,
// "Levels").
#include <ckpt/plan.hpp>
#include <cmath>

#include "policy/validate.hpp"

namespace ckpt::plan {

namespace {

// A/T + B*T: the checkpoint cost per second of work and the rework rate.
struct Terms {
  double a = 0, b = 0, restarts = 0;
};

Terms terms(const LevelsInput& in, uint64_t n1, uint64_t n2) {
  const double lambda = 1 / in.mtbf_s;
  const double k1 = double(n1), k2 = double(n2);
  Terms t;
  // Per cycle of n1*n2 checkpoints: n2 reach level 1, one of those level 2.
  t.a = ((k1 * k2 - k2) * in.checkpoint_s[0] + (k2 - 1) * in.checkpoint_s[1] + in.checkpoint_s[2]) /
        (k1 * k2);
  // A failure of class i loses on average half the period of level i.
  t.b = lambda / 2 * (in.share[0] + in.share[1] * k1 + in.share[2] * k1 * k2);
  for (int i = 0; i < 3; ++i) t.restarts += lambda * in.share[i] * in.restart_s[i];
  return t;
}

Status check(const LevelsInput& in) {
  static const char* const kCost[3] = {"the local checkpoint's cost",
                                       "the partner checkpoint's cost",
                                       "the shared checkpoint's cost"};
  static const char* const kRestart[3] = {"the local restart", "the partner restart",
                                          "the shared restart"};
  for (int i = 0; i < 3; ++i) {
    CKPT_TRY(need_positive(kCost[i], in.checkpoint_s[i]));
    CKPT_TRY(need_non_negative(kRestart[i], in.restart_s[i]));
    CKPT_TRY(need_non_negative("a failure class's share", in.share[i]));
  }
  CKPT_TRY(need_positive("the MTBF", in.mtbf_s));
  const double total = in.share[0] + in.share[1] + in.share[2];
  if (std::fabs(total - 1) > 1e-6)
    return make_error(EINVAL, "the failure classes' shares must add up to 1, not " + figure(total));
  if (in.max_ratio < 1 || in.max_ratio > 10000)
    return make_error(EINVAL, "the largest ratio searched must be in [1, 10000], not " +
                                  std::to_string(in.max_ratio));
  return {};
}

}  // namespace

double levels_waste(const LevelsInput& in, double period_s, uint64_t n1, uint64_t n2) {
  const Terms t = terms(in, n1, n2);
  return t.a / period_s + t.b * period_s + t.restarts;
}

Result<LevelsPlan> plan_levels(const LevelsInput& in) {
  CKPT_TRY(check(in));
  LevelsPlan best;
  best.waste = INFINITY;
  for (uint64_t n1 = 1; n1 <= in.max_ratio; ++n1) {
    for (uint64_t n2 = 1; n2 <= in.max_ratio; ++n2) {
      const Terms t = terms(in, n1, n2);
      const double period = std::sqrt(t.a / t.b);
      const double waste = 2 * std::sqrt(t.a * t.b) + t.restarts;
      if (waste < best.waste) {
        best.waste = waste;
        best.per_next[0] = n1;
        best.per_next[1] = n2;
        best.period_s[0] = period;
        best.period_s[1] = period * double(n1);
        best.period_s[2] = period * double(n1 * n2);
      }
    }
  }
  // Everything on the shared level: Young's period and its waste.
  const double lambda = 1 / in.mtbf_s;
  best.single_period_s = std::sqrt(2 * in.checkpoint_s[2] / lambda);
  best.single_waste = std::sqrt(2 * in.checkpoint_s[2] * lambda) + lambda * in.restart_s[2];
  return best;
}

}  // namespace ckpt::plan
