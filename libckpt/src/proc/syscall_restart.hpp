// What a restored thread's registers must be so a system call the checkpoint
// interrupted (nanosleep, read, poll...) continues as if never interrupted.
#pragma once

#include <sys/user.h>

namespace ckpt::proc {

// Given the registers captured at the freeze stop, returns the registers to
// resume with in a fresh process, which has no kernel-side restart block.
user_regs_struct resume_registers(const user_regs_struct& captured);

// The same for the live process it was captured from, after system calls were
// injected into it (which hides the pending restart from the kernel): exactly
// the restart the kernel itself would have made, restart block included.
user_regs_struct live_resume_registers(const user_regs_struct& captured);

}  // namespace ckpt::proc
