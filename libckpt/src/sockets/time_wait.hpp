// Old incarnations of a restored job's connections: a job killed on this
// node leaves its loopback connections in TIME-WAIT for a minute, and those
// keep a listener without SO_REUSEADDR from listening on its port again.
#pragma once

#include <cstdint>

namespace ckpt::sockets {

// Ends (SOCK_DESTROY through sock_diag) every TIME-WAIT socket whose local
// port is `port`. Returns how many went, or -errno when this kernel cannot
// destroy them (no CONFIG_INET_DIAG_DESTROY, or a kernel older than the
// TIME-WAIT support of tcp_abort): the caller then waits them out.
int destroy_time_wait(uint16_t port);

// Whether a socket of /proc/net/tcp* is such a leftover: TIME-WAIT, or a
// closing connection that no process holds any more (inode 0: FIN-WAIT,
// LAST-ACK, CLOSING after a kill; across nodes these linger while the
// peer's answer is on its way).
bool is_leftover(unsigned state, uint64_t inode);

}  // namespace ckpt::sockets
