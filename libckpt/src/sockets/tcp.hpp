// TCP sockets: saved from a frozen process and recreated at restore. An
// established connection is read and rebuilt in the kernel's repair mode
// (TCP_REPAIR): sequence numbers, queues, window and negotiated options go
// back as they were, without a handshake and without a packet to the peer.
// What is supported and refused: docs/sockets.md.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <set>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "sockets/tcp_lock.hpp"
#include "util/fd.hpp"

namespace ckpt::sockets {

// TCP_REPAIR_OFF_NO_WP: leave repair mode without sending a window probe.
constexpr int kRepairOffNoProbe = -1;

// The socket inodes that the job's members hold (their /proc/PID/fd links).
std::set<uint64_t> job_socket_inodes(const std::vector<pid_t>& job);

// Fills `f` (kind kTcp) from `sock`, this tool's copy of the target's socket
// (pidfd_getfd). `pid` names the netns tables that find the peer of a
// connection; the peer must be a socket in `job_sockets` unless
// `allow_outside` (then marked kTcpOptOutside). Refuses states other than unconnected, listening
// and established, and a listening socket with connections not yet accepted.
Status collect_tcp(pid_t pid, int sock, const std::set<uint64_t>& job_sockets, bool allow_outside,
                   const std::string& what, image::FileRecord* f);

// A restored connection still in repair mode: it leaves it once every
// socket of the job exists (a peer that does not yet exist would answer the
// window probe with a reset).
struct Repaired {
  int fd;  // borrowed: owned by the caller's file table
  bool reuse_addr;
  bool outside = false;  // its peer is not in the job: unlocked after (tcp_lock.hpp)
  Connection conn{};
};

// Creates the socket of `f`. A connection comes back in repair mode and is
// appended to `repaired`. A listener that waits for old connections to
// leave its port says so to `log`.
Result<UniqueFd> restore_tcp(const image::FileRecord& f, const std::string& what,
                             std::vector<Repaired>* repaired, const LogFn* log = nullptr);

// A connection to a peer outside the job kept in repair mode past the
// restore of the files, until the peer's side exists too (a job across
// nodes: nodes/restore_hold); `fd` is this process's own copy.
struct Held {
  UniqueFd fd;
  Repaired r;
};

// Takes the connections out of repair mode (each sends a window probe, so
// both ends resynchronise at once) and sets what repair mode resets. With
// `hold`, connections to peers outside the job stay in repair mode and are
// handed over there instead.
Status finish_tcp(const std::vector<Repaired>& repaired, std::vector<Held>* hold = nullptr);
// The held connections leave repair mode.
Status finish_held(std::vector<Held>* held);

}  // namespace ckpt::sockets
