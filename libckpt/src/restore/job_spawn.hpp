// Creates a job's processes for restore: a tree of children of the caller
// with their checkpointed PIDs (clone3 + set_tid), each made by its own
// parent so parent/child links are the original ones; sessions and process
// groups led by a member are recreated in order, with the controlling
// terminal and foreground group of a session whose pty is the job's;
// zombies exit as they had;
// every live member sets up its descriptors, working directory, umask, name
// and signal dispositions, then waits to be seized. The caller gets them
// seized and stopped (ptrace), ready to be rebuilt from the outside.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

#include "image/job_image.hpp"
#include "image/model.hpp"
#include "restore/files.hpp"

namespace ckpt::restore {

struct SpawnMember {
  const image::JobMember* member = nullptr;
  const image::ImageMeta* meta = nullptr;  // nullptr for a zombie
  restore::PreparedFiles* files = nullptr;
  // The slave of the pty that is its session's controlling terminal (-1:
  // none), a descriptor of the restorer that every member inherits: the
  // session leader takes it as its controlling terminal before it makes
  // any child (they inherit it), the leader of its foreground group makes
  // that group the foreground one.
  int ctty_fd = -1;
  bool foreground = false;
};

// `members` in job order (the root first). Returns their PIDs; the live
// ones are seized (PTRACE_O_EXITKILL: they die with the caller) and
// stopped. With `new_pid` a job of one takes another PID where its own is
// taken; a job of more keeps every member's (they know each other by PID):
// a taken one fails with EEXIST, as without `new_pid`.
// A process that cannot be made kills every one made so far.
Result<std::vector<pid_t>> spawn_job(const std::vector<SpawnMember>& members, bool new_pid);

// Kills the spawned job (every PID that is not 0) and reaps the root.
void kill_job(const std::vector<pid_t>& pids);

}  // namespace ckpt::restore
