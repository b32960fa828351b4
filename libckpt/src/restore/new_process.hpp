// Steps every new process of a restore takes in itself, before it is
// rebuilt from the outside: creation with the checkpointed PID, and the
// state it sets up with its own system calls (restore/job_spawn for jobs,
// restore/spawn for migration).
#pragma once

#include <sys/types.h>

#include <string>

#include "image/model.hpp"

namespace ckpt::restore {

// clone3 with set_tid = `want` (exit signal SIGCHLD); waits while the PID is
// held by a zombie on its way out; with `new_pid`, a PID that stays taken
// gives way to any PID. Returns as fork() does, errno set on failure.
long clone_with_pid(pid_t want, bool new_pid);

// In the new process: forgets glibc's rseq registration (the kernel would
// write its area once unmapped).
void unregister_rseq();

// In the new process: working directory, umask, name and every signal
// disposition of `meta` (raw kernel structs, so the restorer address is the
// checkpointed one). False with *err set on failure.
bool set_process_basics(const image::ImageMeta& meta, std::string* err);

}  // namespace ckpt::restore
