// The checkpoint period: Young/Daly's first order and the exact expected
// time minimised numerically (docs/policy.md).
#include <ckpt/plan.hpp>
#include <cmath>

#include "policy/validate.hpp"

namespace ckpt::plan {

Result<double> platform_mtbf(double node_mtbf_s, double nodes) {
  CKPT_TRY(need_positive("the node MTBF", node_mtbf_s));
  if (!std::isfinite(nodes) || nodes < 1 || nodes != std::floor(nodes))
    return make_error(EINVAL, "the node count must be a whole number >= 1, not " + figure(nodes));
  return node_mtbf_s / nodes;
}

namespace {

double lambda_of(const IntervalInput& in) {
  return (1 - in.predicted) / in.mtbf_s;
}
double silent_of(const IntervalInput& in) {
  return in.silent_mtbf_s > 0 ? 1 / in.silent_mtbf_s : 0;
}

Status check(const IntervalInput& in) {
  CKPT_TRY(need_positive("the checkpoint cost C", in.checkpoint_s));
  CKPT_TRY(need_non_negative("the restart cost R", in.restart_s));
  CKPT_TRY(need_positive("the MTBF", in.mtbf_s));
  CKPT_TRY(need_non_negative("the verification cost V", in.verify_s));
  CKPT_TRY(need_non_negative("the silent-error MTBF", in.silent_mtbf_s));
  CKPT_TRY(need_fraction("the predicted fraction p", in.predicted));
  // A platform that fails before one checkpoint is written cannot make progress.
  if (in.mtbf_s <= in.checkpoint_s + in.verify_s)
    return make_error(EINVAL, "the MTBF (" + figure(in.mtbf_s) +
                                  " s) must be longer than the checkpoint cost (" +
                                  figure(in.checkpoint_s + in.verify_s) + " s)");
  if (in.silent_mtbf_s > 0 && in.silent_mtbf_s <= in.checkpoint_s + in.verify_s)
    return make_error(EINVAL, "the silent-error MTBF (" + figure(in.silent_mtbf_s) +
                                  " s) must be longer than C + V (" +
                                  figure(in.checkpoint_s + in.verify_s) + " s)");
  if (in.silent_mtbf_s == 0 && in.verify_s > 0)
    return make_error(EINVAL, "a verification cost V needs a silent-error MTBF");
  return {};
}

}  // namespace

double expected_period_time(const IntervalInput& in, double work_s) {
  double lambda = lambda_of(in), ls = silent_of(in);
  double w = work_s + in.verify_s;
  // (e^(lambda*W) - 1)/lambda: the attempts' expected length until one
  // survives its fail-stop errors; expm1 keeps it exact for small lambda*W.
  double attempts = std::expm1(lambda * w) / lambda;
  return in.checkpoint_s + std::exp(ls * work_s) * attempts +
         in.restart_s * std::expm1(lambda * w + ls * work_s);
}

double overhead(const IntervalInput& in, double work_s) {
  return expected_period_time(in, work_s) / work_s - 1;
}

Result<IntervalPlan> plan_interval(const IntervalInput& in) {
  CKPT_TRY(check(in));
  IntervalPlan p;
  p.lambda = lambda_of(in);
  p.lambda_silent = silent_of(in);
  double cost = in.checkpoint_s + in.verify_s;
  double rate = p.lambda_silent + p.lambda / 2;  // Young/Daly: 2*C/lambda = C/(lambda/2)
  p.young_daly_period_s = std::sqrt(cost / rate);
  p.young_daly_overhead = 2 * std::sqrt(rate * cost);
  if (!in.restart_known) {
    p.exact_computed = false;
    p.note = "exact E(T) not computed: it needs the restart time R (Young/Daly does not use it)";
    return p;
  }

  // H(T) falls then rises (for fail-stop errors alone its derivative has one
  // root, see docs/policy.md), so a golden-section search over log T finds
  // the minimum. The upper end keeps the exponentials finite.
  double hi = std::min(p.young_daly_period_s * 1e3, 600 / (p.lambda + p.lambda_silent));
  double a = std::log(p.young_daly_period_s * 1e-6), b = std::log(hi);
  const double g = (std::sqrt(5.0) - 1) / 2;
  double x1 = b - g * (b - a), x2 = a + g * (b - a);
  double f1 = overhead(in, std::exp(x1)), f2 = overhead(in, std::exp(x2));
  for (int i = 0; i < 200 && b - a > 1e-12; ++i) {
    if (f1 <= f2) {
      b = x2, x2 = x1, f2 = f1;
      x1 = b - g * (b - a), f1 = overhead(in, std::exp(x1));
    } else {
      a = x1, x1 = x2, f1 = f2;
      x2 = a + g * (b - a), f2 = overhead(in, std::exp(x2));
    }
  }
  p.exact_period_s = std::exp((a + b) / 2);
  p.exact_overhead = overhead(in, p.exact_period_s);
  p.exact_overhead_at_young_daly = overhead(in, p.young_daly_period_s);
  p.period_difference = (p.young_daly_period_s - p.exact_period_s) / p.exact_period_s;
  p.overhead_difference = (p.young_daly_overhead - p.exact_overhead) / p.exact_overhead;
  p.first_order_ok =
      std::fabs(p.period_difference) <= 0.10 && std::fabs(p.overhead_difference) <= 0.10;
  if (!p.first_order_ok) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "first order is off: T* is %+.0f %% from the exact optimum and H* %+.0f %% from "
                  "its overhead (C and R are not small against the MTBF)",
                  100 * p.period_difference, 100 * p.overhead_difference);
    p.note = buf;
  }
  return p;
}

}  // namespace ckpt::plan
