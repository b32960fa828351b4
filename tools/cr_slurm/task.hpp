// What the SPANK plugin hands to cr_slurm in a task's environment
// (CR_SLURM_*), read once and removed, so the job's own environment is what
// it would have been without the plugin.
#pragma once

#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "cr_run/state.hpp"

namespace cr_slurm {

struct Task {
  std::string job;   // Slurm job ID
  std::string step;  // step ID, or "batch" for the batch script
  std::string task;  // global task ID (rank)
  std::string dir;   // this task's checkpoints: BASE/job-J/step-S/task-T
  std::vector<std::string> command;
  cr_run::Schedule schedule;
  long before_end_s = -1;      // stop this long before the time limit (-1: not asked)
  int stop_signal = 0;         // checkpoint, stop and requeue on this signal
  unsigned tasks_in_step = 1;  // SLURM_NTASKS (1 for the batch script)
};

// argv is cr_slurm's own: argv[0] took the place of the task's program,
// whose name is CR_SLURM_COMMAND0.
ckpt::Result<Task> take_task(int argc, char** argv);

// Seconds in squeue's %L form ([D-]HH:MM:SS, MM:SS); -1 for UNLIMITED,
// NOT_SET and anything else.
long parse_time_left(const std::string& text);

}  // namespace cr_slurm
