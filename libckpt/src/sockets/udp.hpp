// UDP sockets (IPv4 and IPv6) of a job: saved from frozen members and made
// again at restore (docs/jobs.md, "UDP sockets"). The receive queue is read
// through the tool's own copy of the socket with SO_PEEK_OFF + MSG_PEEK, so
// nothing is consumed, and each datagram keeps its sender and its
// boundaries; at restore it is sent again from a socket with the sender's
// address (the job's own, or a stand-in bound to it).
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "sockets/address.hpp"
#include "util/fd.hpp"

namespace ckpt::sockets {

// Fills `f` (kind kUdp) from `sock`, this tool's copy of a UDP socket of
// process `pid` (whose netns tables list the multicast groups). Refused by
// name: multicast group memberships, UDP_CORK or data being sent, a queued
// datagram larger than the buffer or more than 100000 of them.
Status collect_udp(pid_t pid, int sock, const std::string& what, image::FileRecord* f);

// What the job's UDP sockets need once all of them exist.
struct UdpJob {
  struct Datagram {
    Endpoint from, to;
    std::vector<uint8_t> data;
  };
  struct Socket {
    int fd = -1;  // borrowed: owned by the restore's file table
    Endpoint local, peer;
    bool connected = false;
    int rcvbuf = 0;               // set after the refill (the refill raises it meanwhile)
    uint64_t peek_off = 0;        // SO_PEEK_OFF + 1
    std::vector<Datagram> queue;  // its receive queue, oldest first
    std::string what;
  };
  std::vector<Socket> sockets;
};

// Creates the socket of `f`: options that bind(2) depends on, bound to its
// address; a connected socket connects only in finish_udp, after its queue
// is refilled (a connected socket takes datagrams from its peer only).
Result<UniqueFd> restore_udp(const image::FileRecord& f, const std::string& what, UdpJob* job);

// Once every socket of the job exists: refills each receive queue in order,
// each datagram from its sender's address, waits until all have arrived,
// then connects and sets the receive buffer and SO_PEEK_OFF.
Status finish_udp(UdpJob* job);

}  // namespace ckpt::sockets
