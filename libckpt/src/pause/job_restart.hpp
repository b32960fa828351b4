// cr_pause of a job of several processes: kill and restore with the same
// PIDs (pause/job_restart.cpp says why not in place).
#pragma once

#include <ckpt/pause.hpp>

#include "image/job_image.hpp"

namespace ckpt::pause {

// Rolls the job of opts.pid back to generation `gen` of opts.dir, whose
// members are `job`. Refused, the job untouched, unless every member's chain
// verifies, the root runs the checkpointed program and every PID the
// checkpoint needs is a member of the running job or free.
Result<PauseStats> pause_job_by_restart(const PauseOptions& opts, uint64_t gen,
                                        const image::JobMeta& job);

}  // namespace ckpt::pause
