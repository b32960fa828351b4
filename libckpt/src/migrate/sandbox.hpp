// The seccomp allowlist of cr_recv's connection handler (docs/migration.md).
#pragma once

#include <ckpt/result.hpp>

namespace ckpt::migrate {

// From now on this process may only make the system calls receiving a
// stream needs (socket I/O, writing the chain's files, memory, exit); any
// other call kills it (SIGSYS). Inherited by children, irrevocable.
Status apply_receiver_sandbox();

}  // namespace ckpt::migrate
