// cr_run's launcher loop: runs the job as its child (and child subreaper, so
// orphaned members come back to it), checkpoints it on the schedule and on
// SIGUSR1, and restarts it from the newest committed generation when its
// root dies by a signal.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <ckpt/result.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cr_run/adopted.hpp"
#include "cr_run/auto_interval.hpp"
#include "cr_run/flusher.hpp"
#include "cr_run/log.hpp"
#include "cr_run/state.hpp"
#include "nodes/partner.hpp"

namespace cr_run {

// cr_run's exit status after a stop: the job was checkpointed and ended on
// request, and `cr_run --resume` continues it (sysexits' EX_TEMPFAIL).
inline constexpr int kStoppedExit = 75;

// What makes the loop checkpoint outside its schedule.
struct Triggers {
  int checkpoint_signal = SIGUSR1;  // a checkpoint, and the job runs on
  int stop_signal = SIGUSR2;        // a checkpoint, then the job is ended (a stop)
  double stop_at = 0;               // CLOCK_REALTIME seconds of a stop (0: none)
  // Asked when the stop time comes: a later stop time if it moved (a batch
  // system's time limit was extended), else 0 to stop now.
  std::function<double()> stop_moved;
  // A job that ends after a forwarded SIGTERM/SIGINT/SIGHUP has finished
  // (cr_run). Under a batch system that signal means the job is being
  // taken off the node (a cancel, a requeue, a preemption): false records
  // it as stopped instead, so that --resume restores its newest checkpoint.
  bool termination_ends_job = true;
};

class Supervisor {
 public:
  Supervisor(std::string dir, State state, Log& log, Triggers triggers = {})
      : dir_(std::move(dir)), state_(std::move(state)), log_(log), triggers_(triggers) {}
  // A new job: starts the command. Returns cr_run's exit status.
  int run();
  // After cr_run died: adopts the job if it still runs (a full checkpoint,
  // then watched as it runs on: never killed to be restored), else restores
  // it from the newest committed generation (or starts it again if none).
  int resume();

 private:
  int loop();
  bool start_command();
  bool checkpoint(const std::string& why);
  bool restore_newest(const std::string& why);
  bool adopt();
  int finish(int status);
  bool stop(const std::string& why);
  int interrupted(int status);
  double wait_seconds(double next) const;
  bool adopted_root_gone() const;
  void kill_leftovers();
  void save();
  void record_root(pid_t pid);
  void start_planning();
  void replan(nlohmann::json& fields);
  double period() const;
  // Where checkpoints are written: the local level with --local, else DIR.
  const std::string& write_dir() const;
  void start_levels();
  // A level the job's checkpoints are in: DIR (the shared level with
  // --local, else the only one), the local level, or the partner's copy
  // (fetched into the local level to be restored).
  struct Level {
    std::string dir;
    std::string name;  // "local", "partner", "shared", or "" with one level
    Point newest;      // its newest committed generation (chain 0: none)
  };
  std::vector<Level> levels() const;
  // The same, from levels() already asked (the partner is asked once).
  bool restore_newest(const std::string& why, const std::vector<Level>& ls);
  bool restore_from(const Level& level, const std::string& why);
  ckpt::nodes::Partner partner() const;
  void drop_partner_copies();
  // A copy of a checkpoint reached `level` in `seconds` (recorded in the state).
  void record_cost(const std::string& level, double seconds);
  void record_stopped();

  std::string dir_;
  State state_;
  Log& log_;
  Triggers triggers_;
  bool terminating_ = false;          // a termination signal was forwarded: no restart
  std::optional<AutoInterval> auto_;  // --interval auto
  std::optional<Adopted> adopted_;    // --resume found the job running: watched, not our child
  // --local: copies to the further levels (DIR, the shared level; the partner).
  std::vector<std::unique_ptr<Flusher>> flushers_;
};

// Blocks the signals the loop takes synchronously (call before any fork).
void block_signals(const Triggers& triggers = {});

}  // namespace cr_run
