// Puts a new process's descriptors at their numbers: each prepared source
// (an fd this process inherited from the restorer) is dup2'd to its target.
// A source may sit at a number another target needs; it is moved out of
// the way only then, to a free number no target has, and every source is
// closed once placed. So a process whose descriptors fill most of its limit
// of open files (valgrind keeps its own just below the limit; a server may
// hold thousands) needs a few spare numbers, not a second set.
#pragma once

#include <string>
#include <vector>

#include "restore/files.hpp"

namespace ckpt::restore {

// `keep_fd` (an fd of ours to keep open) is moved off any target number.
// False with *err on failure. Runs in the new process before it runs.
bool place_fds(std::vector<PreparedFile>& fds, int* keep_fd, std::string* err);

}  // namespace ckpt::restore
