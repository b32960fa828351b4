// One request and its answer on a NETLINK_SOCK_DIAG socket (UNIX socket
// queries, TIME-WAIT destruction).
#pragma once

#include <linux/netlink.h>

#include <cstddef>

namespace ckpt::sockets {

// Sends `req` (a nlmsghdr and its payload, `len` bytes) to the kernel and
// reads the answer into `buf`: its first message, checked to lie within
// what was read, or nullptr with errno set (EPROTO for a short answer).
const nlmsghdr* sock_diag_ask(int nl, const void* req, size_t len, char* buf, size_t cap);

}  // namespace ckpt::sockets
