// A restore in a PID namespace of its own, for a job whose PIDs are taken
// here: the job's members know each other by PID, so they cannot take new
// ones; in a new namespace every PID is free. The tool forks the
// namespace's first process (its init), which mounts a /proc of the
// namespace in a mount namespace of its own (so the job's /proc/PID paths
// name its own processes), restores the job there, then reaps: it exits
// once no process is left in the namespace, with the root's status
// (128 + N for signal N), and passes SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 on
// to the root (an init gets no signal it has no handler for).
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>

namespace ckpt::cli {

struct NamespacedRestore {
  pid_t init = 0;      // the namespace's init, a child of the caller
  pid_t root = 0;      // the restored root, as the caller sees it
  RestoreStats stats;  // stats.pid: the root as the job sees it (its own PID)
};

// Restores `opts` (with the original PIDs) in a new PID and mount namespace.
// Returns once the job runs; the init keeps running after the caller exits.
Result<NamespacedRestore> restore_in_pid_namespace(RestoreOptions opts);

}  // namespace ckpt::cli
