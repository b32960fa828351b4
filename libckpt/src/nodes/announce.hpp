// A gratuitous ARP for each IPv4 address a moved part brought to this node
// (cr_job migrate's destination, docs/nodes.md): the other nodes' neighbour
// entries for the address point at this node's link-layer address at once,
// instead of after their entry for the old node went stale and was probed
// (several seconds in which their retransmissions go to the old node).
#pragma once

#include <vector>

#include "sockets/tcp_lock.hpp"

namespace ckpt::nodes {

// For every distinct local IPv4 address of `conns` that is on an Ethernet
// interface here: one ARP request with sender and target address both that
// address, broadcast on that interface (a packet socket). Returns how many
// were sent; failures are not errors (the neighbours then learn it late).
int announce_addresses(const std::vector<sockets::Connection>& conns);

}  // namespace ckpt::nodes
