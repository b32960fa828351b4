// Job pause: roll a live process back in place to its newest checkpoint
// (same process, same PID), instead of killing and restoring it. A job of
// several processes (cr_full --tree) is rolled back by kill and restore
// with the same PIDs instead (docs/jobs.md, "Pause").
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <string>

namespace ckpt {

struct PauseOptions {
  std::string dir;  // checkpoint directory of this process
  pid_t pid = 0;
  bool tree = false;  // the job of pid (also implied by a chain taken with --tree)
  LogFn log;          // a job's restart: what its restore waits for (ckpt.hpp)
};

struct PauseStats {
  uint64_t generation = 0;
  // How the pages that may differ were found: "tracker" (the chain's
  // pagemap-scan tracker: only pages written since the checkpoint) or
  // "compare" (every saved page is read back and compared).
  std::string method;
  // "in-place" (the same processes continue) or "restart" (a job: every
  // member killed and restored with its PID; the root is now a child of the
  // caller, which should wait for it).
  std::string how = "in-place";
  pid_t pid = 0;                // the (root) process now running the checkpoint
  uint64_t processes = 1;       // members rolled back
  uint64_t pages_compared = 0;  // pages read back and compared with the image
  uint64_t pages_written = 0;   // pages rewritten (they differed, or their mapping was new)
  uint64_t pages_dropped = 0;   // populated now but empty at the checkpoint: MADV_DONTNEED
  uint64_t vmas_kept = 0, vmas_unmapped = 0, vmas_mapped = 0;
  uint64_t files_reopened = 0, files_closed = 0;
  double frozen_seconds = 0;  // a restart: from the kill until the job runs again
  double seconds = 0;
  double reap_seconds = 0;     // a restart: until every PID of the job was free again
  double restore_seconds = 0;  // a restart: the restore itself
};

// Rolls process opts.pid back to the newest generation in opts.dir. Refused
// (process untouched) when the checkpoint is not of this process, cannot be
// verified, or thread counts differ; a failure after the process began to
// change kills it rather than leave a mix of two states.
Result<PauseStats> pause_process(const PauseOptions& opts);

}  // namespace ckpt
