// cr_run --interval auto: the checkpoint period planned by cr_plan's C API
// (ckpt/plan.h, the exact E(T) optimum) from what this job's checkpoints
// cost on this machine, planned again after every checkpoint.
#pragma once

#include <optional>
#include <string>

namespace cr_run {

class AutoInterval {
 public:
  // Before anything is measured C and R are taken as 1 s each (the first
  // checkpoint comes after the period those give).
  static constexpr double kProvisional_s = 1.0;
  static constexpr double kDefaultMtbf_s = 86400;  // one day

  explicit AutoInterval(double mtbf_s) : mtbf_s_(mtbf_s) {}

  // A committed checkpoint's total_seconds.
  void checkpoint_done(double total_s, bool full);
  // A restore this launcher made (its restore_seconds): R from then on.
  void restore_done(double seconds);

  // Plans again; false (and `error` says why) when cr_plan refuses the
  // figures, and the previous period stays.
  bool plan(std::string& error);

  double interval_s() const { return interval_s_; }
  double C() const { return C_; }
  double R() const { return R_; }
  double mtbf_s() const { return mtbf_s_; }
  const char* r_source() const { return r_source_; }

 private:
  double mtbf_s_;
  double sum_s_ = 0;  // total_seconds of every checkpoint so far
  unsigned count_ = 0;
  double C_ = kProvisional_s;
  double R_ = kProvisional_s;
  const char* r_source_ = "provisional";
  double interval_s_ = 0;
};

}  // namespace cr_run
