// The job-wide side (cr_job): drives the agents of every node of a job
// through a coordinated checkpoint or restart (docs/nodes.md).
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::nodes {

struct Node {
  std::string addr;  // the agent, HOST:PORT
  pid_t pid = 0;     // checkpoint: the root of the job's part on that node
};

// A node file: one node a line, "HOST:PORT [PID]"; '#' starts a comment.
Result<std::vector<Node>> read_nodes(const std::string& path);

struct NodeOutcome {
  std::string addr;
  uint64_t generation = 0;
  double frozen_seconds = 0;  // checkpoint: as the agent measured it
  uint64_t processes = 0;
  pid_t pid = 0;  // restart: the restored root
};

struct RoundOutcome {
  std::vector<NodeOutcome> nodes;
  uint64_t generation = 0;
  // Checkpoint: from the first node's FROZEN until the release order went
  // to the last node: the time the job as a whole made no progress (give
  // or take the first node's report on the wire).
  double frozen_seconds = 0;
  // From the first request until every node committed (checkpoint) or ran
  // (restart).
  double total_seconds = 0;
};

struct Coordination {
  std::vector<Node> nodes;
  std::string token_file;
  double timeout = 60;  // per read from an agent
};

// Freeze all, save all, release all, commit all; a node that fails (or
// cannot be reached, or times out) aborts the round on every node.
Result<RoundOutcome> coordinated_checkpoint(const Coordination& c, bool full);

// Every node's part built and held (connections between nodes in repair
// mode), then released together; the generation must be the same on all.
Result<RoundOutcome> coordinated_restart(const Coordination& c, uint64_t generation);

struct MoveOutcome {
  std::string from, to;  // the agents
  pid_t pid = 0;         // the part's root there
  uint64_t rounds = 0, bytes = 0, processes = 0;
  double downtime_seconds = 0;   // the source's final freeze until the part ran there
  double migration_seconds = 0;  // as the source measured it
  double takeover_seconds = 0;   // the address move (the --takeover command)
  double total_seconds = 0;
  // Set when the move completed but the source agent was lost at its end
  // (cr_job says it on stderr).
  std::string note;
};

// Moves the part of node `from` (an agent of c.nodes) to the agent `to`
// while the other nodes' parts run on. Once the part is frozen with its
// state at `to`, `takeover` (a shell command, CKPT_FROM and CKPT_TO set to
// the two agents) moves the address; if the destination fails after that,
// it runs again with the two swapped before the part is released. Any
// failure leaves the part running at `from`.
Result<MoveOutcome> migrate_node(const Coordination& c, const std::string& from,
                                 const std::string& to, bool live, const std::string& takeover);

// The node file with `o.from`'s line replaced by `o.to` and its new PID.
Status rewrite_nodes(const std::string& path, const std::vector<Node>& nodes, const MoveOutcome& o);

}  // namespace ckpt::nodes
