// Connections to peers outside the job (--tcp-established): keeping the
// peer's view of the connection unchanged while this side is checkpointed,
// gone, and rebuilt.
//
// The lock is a FIB rule in the node's network namespace that blackholes
// every packet of one connection (TCP, local -> peer, both ports) that
// carries no socket mark. It is tried before the kernel's local-table
// lookup (priority 0, placed ahead of it), so it also holds when the peer
// is on this node (its address is local; loopback). While it holds: the frozen socket's ACKs never
// leave, so the peer keeps everything it sent as unacknowledged and
// retransmits it later; once the process is gone, the kernel's reset for a
// segment that finds no socket is dropped too, so the peer never sees one.
// The rebuilt socket carries kRestoreMark while the lock is in place (its
// connect and window probe pass), then the rule goes and the mark is put
// back to 0.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <vector>

#include "image/model.hpp"
#include "sockets/address.hpp"

namespace ckpt::sockets {

constexpr uint32_t kRestoreMark = 0x636b7074;  // "ckpt"

struct Connection {
  Endpoint local, peer;
};
inline bool same_connection(const Connection& a, const Connection& b) {
  return a.local == b.local && a.peer == b.peer;
}

// Called after every rule this process added (locked = true) or removed:
// cr_noded journals them so that the rules of a session killed mid-round
// can be removed by the daemon (nodes/lock_journal). None by default.
using LockObserver = void (*)(const Connection& c, bool locked);
void set_lock_observer(LockObserver observer);

// Adds the rule (an existing identical rule is fine).
Status lock_connection(const Connection& c);
// Removes it (none there is fine).
Status unlock_connection(const Connection& c);

// The established TCP connections of the job (sockets in `job_sockets`,
// found in the netns of `pid`) whose peer is not a socket of the job.
std::vector<Connection> outside_connections(pid_t pid, const std::vector<uint64_t>& job_sockets);

// Locks each of `conns`; on a failure the ones locked are unlocked again.
Status lock_all(const std::vector<Connection>& conns);
void unlock_all(const std::vector<Connection>& conns);

// Puts the connection behind fd `fd` of `pid` into repair mode, so that the
// process's end closes it without a FIN or a reset (cr_full --kill).
Status park_connection(pid_t pid, int fd);

// The connection of a TCP record whose peer was outside the job.
bool is_outside(const image::FileRecord& f);
// An established TCP connection (inside the job or not).
bool is_established(const image::FileRecord& f);
Connection connection_of(const image::FileRecord& f);

}  // namespace ckpt::sockets
