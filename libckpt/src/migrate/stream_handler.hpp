// The connection handler's side of a migration (a sandboxed child of
// cr_recv's monitor, migrate/monitor): reads and checks every frame of the
// stream, writes each generation into the staging directory, tells the
// monitor what landed and what committed (migrate/control), and after the
// handover tells the sender whether the process runs (docs/security.md).
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>

#include "migrate/protocol.hpp"

namespace ckpt::migrate {

// The whole stream of authenticated connection `conn` (the gatekeeper
// checked its AUTH, answered with `proof` here), the first generation
// numbered `first_gen`; `ctl` is the monitor's end. *bytes: received.
Status receive_stream(int conn, int ctl, const std::string& staging, const Mac& proof,
                      uint64_t first_gen, uint64_t* bytes);

}  // namespace ckpt::migrate
