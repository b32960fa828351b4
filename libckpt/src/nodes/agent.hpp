// The per-node agent's side of one session (cr_noded): after the token
// handshake, one CHECKPOINT round or one RESTORE, each step reported to the
// coordinator and the next one waited for (docs/nodes.md); or another
// node's partner copies, kept or sent back (nodes/partner.hpp).
#pragma once

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::nodes {

struct AgentConfig {
  std::string dir;             // this node's checkpoint set
  std::vector<uint8_t> token;  // shared with cr_job
  std::string token_file;      // the same, for a migration to another agent
  double timeout = 60;         // per read from the coordinator
  LogFn log;                   // what a session did (DaemonOptions::log)
};

// Serves the connection `fd` (not yet authenticated) to its end. A
// coordinator that goes away, aborts or times out ends the round: the
// node's processes are released untouched (restore: the built job is
// killed) and nothing becomes visible.
Status serve_session(int fd, const AgentConfig& cfg);

}  // namespace ckpt::nodes
