// DIR/job-J/step-S/task-T/slurm.json: where the task ran, run by run (the
// node, Slurm's restart count, when it started), so that a user or an
// administrator can tell which node held which part of a job.
#pragma once

#include <ckpt/result.hpp>

#include "cr_slurm/task.hpp"

namespace cr_slurm {

// Appends this run (SLURMD_NODENAME, SLURM_RESTART_COUNT) to the task's
// manifest, written atomically.
ckpt::Status record_run(const Task& t);

}  // namespace cr_slurm
