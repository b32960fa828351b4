// cr_recv's gate: connections are accepted as they come and each is
// authenticated by a process of its own (the gatekeeper, sandboxed before it
// reads a byte), all at once, each within a short deadline, under a cap on
// how many may wait and how many one source may hold (admission.hpp). Only
// authenticated connections reach the session handler; so no client that
// lacks the token can hold up one that has it. docs/migration.md.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "migrate/admission.hpp"
#include "migrate/protocol.hpp"
#include "util/fd.hpp"

namespace ckpt::migrate {

struct GateLimits {
  double handshake_seconds = 5;  // from accept to a checked AUTH
  size_t max_pending = 128;      // connections not authenticated yet
  size_t max_per_source = 16;    // of those, from one address
  size_t max_ready = 16;         // authenticated, waiting for their session
  bool sandbox = true;
};

struct AuthenticatedConnection {
  UniqueFd conn;
  Mac proof{};  // AUTH_OK's MAC, for the session handler to send
  std::string peer;
};

// Closes every fd of this process but 0-2, `a` and `b` (in a forked handler).
void close_fds_except(int a, int b);

class Gate {
 public:
  // `listen_fd` must be non-blocking; `refused` is told of every connection
  // dropped (peer, reason).
  Gate(int listen_fd, const std::vector<uint8_t>& token, GateLimits limits,
       std::function<void(const std::string& peer, const std::string& why)> refused);
  ~Gate();
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // Accepts and authenticates until a connection is authenticated.
  Result<AuthenticatedConnection> next();

 private:
  struct Pending {
    UniqueFd conn, report, pidfd;
    std::string peer, source;
    double deadline = 0;
  };
  void accept_ready();
  Status start_gatekeeper(uint64_t id, Pending& p);
  void on_report(uint64_t id);
  void drop(uint64_t id, const std::string& why);
  void finish(Pending& p);  // kills (if needed) and reaps the gatekeeper

  int listen_fd_;
  const std::vector<uint8_t>& token_;
  GateLimits limits_;
  std::function<void(const std::string&, const std::string&)> refused_;
  Admission admission_;
  std::map<uint64_t, Pending> pending_;
  std::deque<AuthenticatedConnection> ready_;
  uint64_t next_id_ = 1;
};

}  // namespace ckpt::migrate
