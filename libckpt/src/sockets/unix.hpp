// UNIX sockets of a job: saved from frozen members and rebuilt together at
// restore (docs/jobs.md, "UNIX sockets"). Identity, peer, name and shutdown
// state come from sock_diag (NETLINK_SOCK_DIAG); queued data is peeked
// through the tool's own copy of the socket (SO_PEEK_OFF + MSG_PEEK), so the
// job loses nothing and a datagram stays a datagram. Only receive queues are
// saved: what a socket sent and its peer did not read yet is in the peer's.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "util/fd.hpp"

namespace ckpt::sockets {

// A UNIX socket name for messages: "@..." for an abstract name.
inline std::string printable(const std::string& name) {
  if (name.empty()) return "(unnamed)";
  return name[0] == '\0' ? "@" + name.substr(1) : name;
}

// Fills `f` (kind kUnix) from `sock`, this tool's copy of the target's UNIX
// socket `ino`. A connected socket's peer must be in `job_sockets`.
// Refused by name: a peer outside the job, connections not yet accepted,
// descriptors in flight (SCM_RIGHTS), a name relative to the process's
// directory, queued datagrams that no socket could send again.
Status collect_unix(int sock, uint64_t ino, const std::set<uint64_t>& job_sockets,
                    const std::string& what, image::FileRecord* f);

// What the job's UNIX sockets need once all of them exist.
struct UnixJob {
  struct Message {
    std::string sender;  // the sender's name (datagrams; empty: unnamed or the peer)
    std::vector<uint8_t> data;
  };
  struct Socket {
    int fd = -1;  // borrowed: owned by the restore's file table
    uint64_t ino = 0, peer = 0;
    int type = 0;
    uint64_t state = 0, shutdown = 0;
    std::string name, peer_name;
    uint64_t options = 0, peek_off = 0;  // set after the refill (SO_PASSCRED autobinds a sender)
    int closer = -1;                     // kUnixPeerClosed: the other end, closed after the refill
    bool connect_later = false;          // a datagram socket connected to a named peer
    std::vector<Message> queue;          // its receive queue, oldest first
  };
  std::vector<Socket> sockets;
  std::map<uint64_t, UniqueFd> ahead;    // the other end of a pair made early, by its inode
  std::map<std::string, int> listeners;  // by name
  std::map<std::string, int> dgrams;     // datagram sockets, by name
  std::vector<UniqueFd> closers;         // ends standing for peers that had closed
};

// Creates the socket of `f` (binding its name, replacing a stale socket file
// a killed job left; connecting it to its peer, made here too if it is the
// first of the two) and records what finish_unix must do.
Result<UniqueFd> restore_unix(const image::FileRecord& f, const std::string& what, UnixJob* job);

// Once every socket of the job exists: refills each receive queue from the
// right sender (its peer, or the socket of the job with the sender's name),
// in order, then applies shutdowns.
Status finish_unix(UnixJob* job);

}  // namespace ckpt::sockets
