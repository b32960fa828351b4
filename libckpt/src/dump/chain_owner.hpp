// Whose chain a checkpoint directory holds, before cr_full writes into it (a
// new full supersedes, and so deletes, the chain it finds there).
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <string>

namespace ckpt::dump {

// A directory's chain belongs to the process with the PID and executable its
// generations record (a process restored from them keeps both). When a
// generation in `dir` is of another process, or cannot be read, this refuses
// (EEXIST), unless `force`: then every generation is moved, untouched, into
// DIR/replaced-<chain id> (returned in *moved_to); nothing is deleted.
Status claim_directory(const std::string& dir, pid_t pid, bool force, std::string* moved_to);

}  // namespace ckpt::dump
