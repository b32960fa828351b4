// A restore that waits, every member built and still stopped, before its
// connections to peers outside the job leave repair mode and the members
// run: the per-node part of a job across nodes (docs/nodes.md), whose
// connections between nodes may be released only once both sides exist.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <functional>

namespace ckpt::restore {

// Called with the restored root's PID once every member is built; an error
// kills the built job and is returned. Empty: restore_process as usual.
using ReadyHook = std::function<Status(pid_t root)>;

// Called with the root's PID when every member is about to run: registers
// and signal masks loaded, only the detaches left (the leader's last). It
// cannot stop the release: it is where a caller hands what it needs to
// learn the outcome to someone who outlives it (cr_recv: migrate/handover).
using ReleaseHook = std::function<void(pid_t root)>;

Result<RestoreStats> restore_held(const RestoreOptions& opts, const ReadyHook& ready,
                                  const ReleaseHook& before_release = {});

}  // namespace ckpt::restore
