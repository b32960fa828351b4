// Loopback TCP between the members of a frozen job is still carried by the
// kernel: a segment a member sent just before the freeze may arrive, and be
// acknowledged, while the connection's two ends are being read one after
// the other. Read before it arrives the receiver misses it; read after the
// acknowledgement the sender no longer has it: the bytes are lost for good
// at restore (both ends restore fine and never agree again). A job
// checkpoint therefore waits, frozen, until nothing is in flight on its
// internal connections before it reads any of them.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

namespace ckpt::sockets {

// Returns once every established TCP connection with both ends in `job`
// has nothing in flight either way (what one end has sent, the other has
// received) and nothing queued that the kernel could still send on its own
// (pacing, Nagle, a cork); an error naming a connection still carrying
// data after `max_seconds`.
Status settle_job_tcp(const std::vector<pid_t>& job, double max_seconds = 3.0);

}  // namespace ckpt::sockets
