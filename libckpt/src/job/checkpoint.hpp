// Checkpoint rounds for the tools that move a job elsewhere (cr_migrate
// --tree): the same code as cr_full / cr_incr, into a private directory.
#pragma once

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <functional>
#include <string>

namespace ckpt::job {

// Called with the committed generation's directory while every member is
// still frozen (opts.kill_after only). Success: the members are killed; an
// error: they are released untouched and the error returned.
using CommittedHook = std::function<Status(const std::string& gen_dir)>;

// A full checkpoint numbered `first_generation` when opts.dir holds none,
// else an incremental on its newest generation (of the same root PID).
Result<CheckpointStats> checkpoint_round(const CheckpointOptions& opts, uint64_t first_generation,
                                         const CommittedHook& committed);

}  // namespace ckpt::job
