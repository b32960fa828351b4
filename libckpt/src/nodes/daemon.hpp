// The per-node agent's service (cr_noded): a listening socket, one forked
// session per connection (agent.hpp), the restored jobs kept as children
// and reaped. The loop, the signals and the log's destination are the
// tool's: it calls step() until it wants to stop.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <memory>
#include <set>
#include <string>

#include "nodes/agent.hpp"
#include "util/fd.hpp"

namespace ckpt::nodes {

struct DaemonOptions {
  std::string listen;  // ADDR:PORT ("*" for any address)
  std::string token_file;
  std::string dir;
  double timeout = 60;
  LogFn log;  // what each session did, sessions that died, restored jobs that ended
};

class Daemon {
 public:
  // Loads the token, makes `dir`, removes what sessions of a killed daemon
  // left there and listens. The caller should be a child subreaper
  // (PR_SET_CHILD_SUBREAPER) so that the jobs its sessions restore become
  // its children when their session ends, and are reaped by step().
  static Result<std::unique_ptr<Daemon>> open(const DaemonOptions& opts);

  // One turn: reaps ended sessions and processes (told to the log),
  // removes now and then what dead sessions left, waits up to `wait_ms`
  // for a connection and serves it in a forked session. An error only when
  // no session can be made (fork fails).
  Status step(int wait_ms);

 private:
  explicit Daemon(const DaemonOptions& opts) : opts_(opts) {}
  void note(const std::string& line) const;
  void clean_after_sessions();
  void reap();

  DaemonOptions opts_;
  AgentConfig cfg_;
  UniqueFd listener_;
  std::set<pid_t> sessions_;
  double next_sweep_ = 0;
};

}  // namespace ckpt::nodes
