// What a restored thread's registers must be so a system call the checkpoint
// interrupted (nanosleep, read, poll...) continues as if never interrupted.
#pragma once

#include <sys/user.h>

namespace ckpt::restore {

// Given the registers captured at the freeze stop, returns the registers to
// resume with in a fresh process, which has no kernel-side restart block.
user_regs_struct resume_registers(const user_regs_struct& captured);

}  // namespace ckpt::restore
