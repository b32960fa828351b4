// Landlock for cr_recv's handlers (docs/security.md, "cr_recv's sandbox").
// Landlock confines by path, which seccomp cannot: seccomp sees openat's
// pointer, not the file; Landlock decides on the file actually reached,
// through symlinks and ".." too.
#pragma once

#include <ckpt/result.hpp>
#include <string>

namespace ckpt::migrate {

// From now on this process (and its children) may reach files only beneath
// `dir` (nothing at all when `dir` is empty), may not bind or connect TCP
// sockets, and may not signal or reach abstract sockets outside itself
// (each where the kernel's Landlock ABI has it). Returns false without
// changing anything when the kernel has no Landlock.
Result<bool> landlock_confine(const std::string& dir);

// The kernel's Landlock ABI version (0: none).
int landlock_abi();

}  // namespace ckpt::migrate
