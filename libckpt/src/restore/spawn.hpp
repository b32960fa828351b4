// Creates the process that becomes the restored one: a child of the caller
// with the checkpointed PID (clone3 + set_tid), its file descriptors, working
// directory, umask and name already in place, stopped under ptrace so its
// address space can be rebuilt from the outside.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>

#include "image/model.hpp"

namespace ckpt::restore {

// Returns the PID of the stopped, traced child. With `new_pid`, a taken PID
// is not an error: the child gets whatever PID the kernel gives.
Result<pid_t> spawn_stopped(const image::ImageMeta& meta, bool new_pid);

}  // namespace ckpt::restore
