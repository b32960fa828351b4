// Migration of a running process to another node (cr_migrate / cr_recv).
// Frozen: stop, send everything, the process resumes on the destination.
// Live: iterative pre-copy while the process runs, then a short stop-and-copy.
// The source is killed only after the destination reports the restored
// process running; on any failure before that it continues untouched.
// Protocol and security notes: docs/migration.md.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ckpt {

struct MigrateOptions {
  std::string to;          // receiver, "HOST:PORT"
  std::string token_file;  // shared secret, owner-only
  pid_t pid = 0;
  bool tree = false;  // the job: pid and all its descendants (docs/jobs.md, "Migration")
  bool live = false;
  bool tcp_established = false;  // with tree: connections to peers outside the job (ckpt.hpp)
  std::string tracker = "auto";  // live: the dirty tracker of the pre-copy rounds
  // Live stop rules, checked each round with the target frozen; the first
  // that holds makes that round the last:
  uint64_t threshold_bytes = 1 << 20;  // the dirty set is under this
  uint64_t diff_bytes = 256 << 10;     // it shrank by less than this since the previous round
  double deadline_seconds = 60;        // migration has run this long
  int max_rounds = 30;                 // this is round max_rounds
  double timeout_seconds = 60;         // connect and per-I/O timeout
  ProgressFn progress;
};

struct MigrateRound {
  uint64_t generation = 0;
  uint64_t dirty_bytes =
      0;               // memory the round read (its dirty set; all populated memory in round 1)
  uint64_t bytes = 0;  // bytes sent on the wire
  double seconds = 0;
  double send_seconds = 0;  // until the generation's last byte was sent
  double frozen_seconds = 0;
};

struct MigrateStats {
  bool live = false;
  std::string tracker;
  std::vector<MigrateRound> rounds;
  uint64_t bytes_total = 0;  // everything sent, frames and handshake included
  double migration_seconds = 0;
  double downtime_seconds = 0;  // final freeze until the destination reported the process running
  std::string stop_reason;      // live: which rule ended the pre-copy
  pid_t remote_pid = 0;
  uint64_t processes = 1;  // members of the job moved (the last round's)
};

// Sends process opts.pid to the receiver at opts.to.
Result<MigrateStats> migrate_process(const MigrateOptions& opts);

struct ReceiveOptions {
  std::string listen;      // "ADDR:PORT" (port 0: any; see Receiver::port())
  std::string token_file;  // shared secret, owner-only
  std::string dir;         // also keep the received chain here ("": a private temporary)
  bool new_pid = false;    // restore under a new PID when the original is taken
  bool sandbox = true;     // seccomp allowlist on the connection-handling process
  bool warm = true;        // build the process while generations arrive (else restore at the end)
  double timeout_seconds = 60;  // per I/O, once authenticated
  // Connections not authenticated yet are handled all at once, each by a
  // sandboxed process of its own: each must authenticate within
  // handshake_seconds; at most max_pending wait, at most max_per_source of
  // them from one address (the oldest goes to make room: docs/migration.md).
  double handshake_seconds = 5;
  size_t max_pending = 128;
  size_t max_per_source = 16;
  // Told of every connection refused before or during authentication.
  std::function<void(const std::string& peer, const std::string& why)> on_refused;
  // How each migration was built (phases of the warm finish, a warm build
  // that fell back to a cold restore).
  LogFn log;
};

struct ReceivedProcess {
  pid_t pid = 0;  // the restored process, a child of the caller
  std::string peer;
  uint64_t generations = 0;
  uint64_t bytes = 0;  // received
  double seconds = 0;  // connection to restored process running
  double restore_seconds = 0;
  // How the process was built: "while-arriving" (metadata first: from its
  // layout, memory written as it came), "warm" (from each generation as it
  // was committed), "cold" (from the whole chain at the end).
  std::string build;
  std::string warning;  // the process runs, but something after that failed (keeping --dir)
};

namespace migrate {
class Gate;
}

class Receiver {
 public:
  // Loads the token (refusing a file others may read) and listens.
  static Result<std::unique_ptr<Receiver>> open(const ReceiveOptions& opts);
  ~Receiver();
  int port() const { return port_; }
  // Waits for an authenticated connection (refusing, through on_refused,
  // those that fail to authenticate meanwhile) and serves it: on success the
  // restored process runs as a child of the caller. Nothing is restored
  // unless the whole stream arrived and checked out.
  Result<ReceivedProcess> serve_one();

 private:
  Receiver() = default;
  ReceiveOptions opts_;
  std::vector<uint8_t> token_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::unique_ptr<migrate::Gate> gate_;
};

}  // namespace ckpt
