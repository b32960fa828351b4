// The monitor's side of one migration on cr_recv's node: the connection
// handler forked and sandboxed (migrate/stream_handler), each committed
// generation applied to a process built while the next arrives (warm
// restore), the process restored once the stream is complete (warm, or
// cold from the whole chain), and handed over: held ready, let go, the
// handler told so (docs/security.md, "A receiver killed after COMMIT").
#pragma once

#include <ckpt/migrate.hpp>
#include <ckpt/result.hpp>

#include "migrate/gate.hpp"

namespace ckpt::migrate {

// Serves the authenticated connection `authed` to its end; `listen_fd` is
// closed in the handler.
Result<ReceivedProcess> serve_connection(const ReceiveOptions& opts, int listen_fd,
                                         AuthenticatedConnection authed);

}  // namespace ckpt::migrate
