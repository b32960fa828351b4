// The Slurm commands cr_slurm needs, run as the user would (squeue,
// scontrol): they always match the cluster's Slurm, where a linked libslurm
// would have to match its ABI.
#pragma once

#include <ckpt/result.hpp>
#include <string>

namespace cr_slurm {

// Seconds until the job's time limit; -1 when it has none.
ckpt::Result<long> time_left(const std::string& job);

// `scontrol requeue JOB`: Slurm ends the job's steps and queues it again.
ckpt::Status requeue(const std::string& job);

}  // namespace cr_slurm
