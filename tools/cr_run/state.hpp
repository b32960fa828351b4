// cr_run's record of the job it runs, DIR/cr_run.json: what --resume reads
// after the launcher died or the node rebooted. Written atomically (temporary
// file, fsync, rename) at every change.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cr_run {

struct Schedule {
  double interval_s = 60;      // 0: only on SIGUSR1
  uint64_t incrementals = 4;   // per full
  uint64_t keep = 2;           // chains kept
  uint64_t restarts = 3;       // automatic restarts after a death by signal
  bool auto_interval = false;  // --interval auto: planned from measured costs (interval_s unused)
  double mtbf_s = 0;           // the MTBF that plan assumes
  bool buffered = false;       // --buffered: page content through the page cache, not O_DIRECT
  std::string local_dir;       // --local: checkpoints written here first, then copied to DIR
  double flush_rate = 0;       // --flush-rate: bytes per second of that copy (0: unlimited)
  std::string partner;         // --partner: the agent (HOST:PORT) that keeps a copy too
  std::string partner_token;   // --partner-token: that agent's token file
  std::string partner_name;    // the name the copies are kept under there
};

// A measured cost: `seconds` summed over `n` events.
struct Cost {
  uint64_t n = 0;
  double seconds = 0;
  void add(double s) {
    ++n;
    seconds += s;
  }
  double mean() const { return n ? seconds / double(n) : 0; }
};

struct State {
  std::vector<std::string> command;
  Schedule schedule;
  uint64_t restarts_used = 0;
  uint64_t chain = 0;       // the chain new incrementals go to (0: none yet)
  pid_t root = 0;           // the job's root while it runs
  uint64_t root_start = 0;  // its start time (clock ticks after boot, /proc/PID/stat field 22)
  bool stopped = false;     // checkpointed and ended on request: --resume restores it
  bool finished = false;
  int exit_code = 0;  // when finished: as cr_run exits (128 + N for signal N)
  // With levels (--local): what a checkpoint cost to reach each level
  // ("local": committed there; "partner", "shared": the copy's own time),
  // and a restore from each; what `cr_plan levels --from DIR` plans with.
  std::map<std::string, Cost> checkpoint_costs, restore_costs;
};

std::string state_path(const std::string& dir);
ckpt::Status save(const std::string& dir, const State& s);
// `text` as the whole of `path`, durably: written under a temporary name,
// fsync'd, renamed (a reader sees the old text or the new, never a part).
ckpt::Status write_durably(const std::string& path, const std::string& text);
ckpt::Result<State> load(const std::string& dir);

// A name for a job's copies on the partner level, unique enough not to
// meet another job's there: "run-" and 16 random hex digits.
std::string new_part_name();

// Field 22 of /proc/PID/stat; 0 when the process is gone.
uint64_t start_time(pid_t pid);

}  // namespace cr_run
