// A checkpoint round in steps that a node daemon drives one by one for a
// coordinated checkpoint of a job across nodes (docs/nodes.md): each hook
// runs at a point of cr_full / cr_incr and may block (waiting for the other
// nodes); an error from any hook aborts the round there: the job is
// released untouched and no generation becomes visible.
#pragma once

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <functional>

namespace ckpt::job {

struct RoundHooks {
  // Every member is frozen and its connections to peers outside the job are
  // locked (opts.tcp_established); nothing has been read yet.
  std::function<Status()> frozen;
  // Every member is described and its memory copied: the job is released
  // when this returns.
  std::function<Status()> captured;
  // Every file of the generation is durable: it is renamed into place (and
  // becomes the newest generation) when this returns.
  std::function<Status()> written;
};

// A full checkpoint (`full`) or an incremental one with the hooks.
Result<CheckpointStats> hooked_round(const CheckpointOptions& opts, bool full,
                                     const RoundHooks& hooks);

}  // namespace ckpt::job
