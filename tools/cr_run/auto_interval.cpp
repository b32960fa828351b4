#include "cr_run/auto_interval.hpp"

#include <ckpt/plan.h>

#include <cmath>
#include <cstdlib>

namespace cr_run {

void AutoInterval::checkpoint_done(double total_s, bool full) {
  // C: the mean cost of the checkpoints the schedule takes (fulls and
  // incrementals alike: the period is between any two of them).
  sum_s_ += total_s;
  ++count_;
  C_ = sum_s_ / count_;
  // R, until a restore is measured: the newest full's cost. A restore reads
  // about what that full wrote, and takes less time than writing it did
  // (docs/performance.md, "Restore").
  if (full && r_source_[0] != 'r') {
    R_ = total_s;
    r_source_ = "full";
  }
}

void AutoInterval::restore_done(double seconds) {
  R_ = seconds;
  r_source_ = "restore";
}

bool AutoInterval::plan(std::string& error) {
  ckpt_plan_interval_opts o{};
  o.size = sizeof o;
  o.checkpoint_s = C_;
  o.restart_s = R_;
  o.mtbf_s = mtbf_s_;
  ckpt_plan_interval_result r{};
  r.size = sizeof r;
  char msg[256] = "";
  if (int rc = ckpt_plan_interval(&o, &r, msg, sizeof msg); rc != 0) {
    error = msg;
    return false;
  }
  interval_s_ = r.exact_period_s;
  return true;
}

}  // namespace cr_run
