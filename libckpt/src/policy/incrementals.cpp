// How many incrementals between two fulls (docs/policy.md).
#include <ckpt/plan.hpp>
#include <cmath>

#include "policy/validate.hpp"

namespace ckpt::plan {

double savings(int64_t n, double full_s, double incremental_s, double restart_full_s,
               double restart_full_n_incr_s) {
  return double(n) * (full_s - incremental_s) - (restart_full_n_incr_s - restart_full_s);
}

Result<IncrementalPlan> plan_incrementals(const IncrementalInput& in) {
  CKPT_TRY(need_positive("the full checkpoint cost O_f", in.full_s));
  CKPT_TRY(need_non_negative("the incremental cost O_i", in.incremental_s));
  CKPT_TRY(need_non_negative("the restart cost from a full R_f", in.restart_full_s));
  CKPT_TRY(need_non_negative("the restart cost from a full and an incremental R_(f+i)",
                             in.restart_full_incr_s));
  CKPT_TRY(need_positive("the MTBF", in.mtbf_s));
  CKPT_TRY(need_non_negative("the interval", in.interval_s));
  if (in.mtbf_s <= in.full_s)
    return make_error(EINVAL, "the MTBF (" + figure(in.mtbf_s) +
                                  " s) must be longer than the full checkpoint cost (" +
                                  figure(in.full_s) + " s)");

  IncrementalPlan p;
  p.mu = in.incremental_s / in.full_s;
  p.delta_s = in.restart_full_incr_s - in.restart_full_s;
  // Decision: without a measured interval, the Young/Daly period of a full.
  p.interval_s = in.interval_s > 0 ? in.interval_s : std::sqrt(2 * in.full_s * in.mtbf_s);
  p.failure_probability = -std::expm1(-p.interval_s / in.mtbf_s);
  if (p.mu >= 1) {
    p.incrementals = 0;
    p.note = "an incremental costs as much as a full: take fulls only";
  } else if (p.delta_s <= 0) {
    p.incrementals = -1;
    p.note = "an incremental adds no restart time: no limit from this model";
    return p;
  } else {
    double m = std::ceil((1 - p.mu) * in.full_s / (p.failure_probability * p.delta_s) - 1);
    // Clamped to a count a scheduler can use; beyond 1e9 the model says "no limit".
    p.incrementals = m < 0 ? 0 : m > 1e9 ? int64_t(1e9) : int64_t(m);
  }
  p.savings_s = savings(p.incrementals, in.full_s, in.incremental_s, in.restart_full_s,
                        in.restart_full_s + double(p.incrementals) * p.delta_s);
  return p;
}

}  // namespace ckpt::plan
