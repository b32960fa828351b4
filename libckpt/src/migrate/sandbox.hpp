// The sandboxes of cr_recv's handlers (docs/migration.md, docs/security.md).
#pragma once

#include <ckpt/result.hpp>
#include <string>

namespace ckpt::migrate {

// The session handler: from now on this process may only make the system
// calls receiving a stream needs (socket I/O, writing the chain's files,
// memory, exit; any other call kills it with SIGSYS), and, where the kernel
// has Landlock, reach files only beneath `staging`. Inherited by children,
// irrevocable.
Status apply_receiver_sandbox(const std::string& staging);

// The gatekeeper of a connection not authenticated yet: socket I/O,
// memory, clocks and exit only; where the kernel has Landlock, no file at
// all.
Status apply_gate_sandbox();

}  // namespace ckpt::migrate
