// A checkpoint taken by a short-lived child of cr_run instead of cr_run
// itself. The job's root is cr_run's child: if cr_run were also its tracer,
// the library's own waits would reap the root when it dies mid-checkpoint,
// and cr_run would never learn that (or how) its job ended. A tracer that is
// not the parent leaves the exit status to the parent.
#pragma once

#include <ckpt/ckpt.hpp>

namespace cr_run {

ckpt::Result<ckpt::CheckpointStats> checkpoint_isolated(const ckpt::CheckpointOptions& opts,
                                                        bool full);

}  // namespace cr_run
