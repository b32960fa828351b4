// Live, frozen or pause ahead of a predicted failure, and back migration
// (docs/policy.md). The live model replays the sender's own rounds and stop
// rules (migrate/sender.cpp) with a constant dirty rate and bandwidth.
#include <algorithm>
#include <ckpt/plan.hpp>
#include <cmath>

#include "policy/validate.hpp"

namespace ckpt::plan {

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Live:
      return "live";
    case Mode::Frozen:
      return "frozen";
    case Mode::Pause:
      return "pause";
  }
  return "?";
}

namespace {

// Rounds of a live migration; the last one is sent with the process frozen.
void precopy(const MigrateInput& in, MigratePlan& p) {
  double elapsed = 0;
  for (int round = 1;; ++round) {
    PrecopyRound r;
    // Round 1 sends all memory; each later one what was written during the previous.
    r.bytes = round == 1
                  ? in.resident_bytes
                  : std::min(in.resident_bytes, in.dirty_bytes_per_s * p.rounds.back().seconds);
    r.seconds = r.bytes / in.bandwidth_bytes_per_s;
    bool last = false;
    if (round > 1) {
      double prev = p.rounds.back().bytes;
      last = true;
      if (r.bytes <= in.threshold_bytes)
        p.stop_reason = "dirty set under the threshold";
      else if (round > 2 && r.bytes + in.diff_bytes > prev)
        p.stop_reason = "dirty set no longer shrinks";
      else if (elapsed >= in.deadline_s)
        p.stop_reason = "deadline";
      else if (round >= in.max_rounds)
        p.stop_reason = "maximum number of rounds";
      else
        last = false;
    }
    p.rounds.push_back(r);
    elapsed += r.seconds;
    if (last) break;
  }
  p.live_downtime_s = p.rounds.back().seconds + in.restart_s;
  p.live_seconds = elapsed + in.restart_s;
}

std::string secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

}  // namespace

Result<MigratePlan> plan_migration(const MigrateInput& in) {
  CKPT_TRY(need_non_negative("the warning lead time", in.lead_s));
  CKPT_TRY(need_non_negative("the dirty rate", in.dirty_bytes_per_s));
  CKPT_TRY(need_positive("the resident size", in.resident_bytes));
  CKPT_TRY(need_positive("the bandwidth", in.bandwidth_bytes_per_s));
  CKPT_TRY(need_non_negative("the restart cost", in.restart_s));
  CKPT_TRY(need_non_negative("the live threshold", in.threshold_bytes));
  CKPT_TRY(need_non_negative("the live shrink step", in.diff_bytes));
  CKPT_TRY(need_positive("the live deadline", in.deadline_s));
  if (in.max_rounds < 2)
    return make_error(
        EINVAL, "live migration needs at least 2 rounds, not " + std::to_string(in.max_rounds));
  MigratePlan p;
  precopy(in, p);
  p.frozen_seconds = in.resident_bytes / in.bandwidth_bytes_per_s + in.restart_s;
  bool live_fits = p.live_seconds <= in.lead_s;
  bool frozen_fits = p.frozen_seconds <= in.lead_s;
  // Live only when it is also the shorter stop: a dirty rate near the
  // bandwidth makes its last round as long as a frozen copy.
  if (live_fits && p.live_downtime_s < p.frozen_seconds) {
    p.mode = Mode::Live;
    p.reason = "live migration takes " + secs(p.live_seconds) + " (down " +
               secs(p.live_downtime_s) + ") within the " + secs(in.lead_s) + " warning";
  } else if (frozen_fits) {
    p.mode = Mode::Frozen;
    p.reason = "frozen migration takes " + secs(p.frozen_seconds) + " within the " +
               secs(in.lead_s) + " warning" +
               (live_fits ? std::string(" and stops the job no longer than live")
                          : ", live would need " + secs(p.live_seconds));
  } else {
    p.mode = Mode::Pause;
    p.reason = "neither fits the " + secs(in.lead_s) + " warning (live " + secs(p.live_seconds) +
               ", frozen " + secs(p.frozen_seconds) +
               "): pause and roll back to the last checkpoint on a spare node";
  }
  return p;
}

Result<BackMigration> plan_back_migration(double remaining_s, double degraded_s, double original_s,
                                          double migration_s) {
  CKPT_TRY(need_non_negative("the remaining time", remaining_s));
  CKPT_TRY(need_positive("the degraded time T_degraded", degraded_s));
  CKPT_TRY(need_positive("the original time T_original", original_s));
  CKPT_TRY(need_non_negative("the migration time", migration_s));
  BackMigration b;
  b.gain_s = remaining_s * (degraded_s - original_s) / original_s - migration_s;
  b.migrate_back = b.gain_s > 0;
  return b;
}

}  // namespace ckpt::plan
