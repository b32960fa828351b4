// Migrating one node's part of a running job to another node's agent while
// the other nodes' parts keep running (cr_job migrate, docs/nodes.md): the
// source agent streams its part (cr_migrate --tree's rounds and frames) to
// the destination agent, which receives, locks the connections to the other
// nodes before the address arrives, and restores at COMMIT.
#pragma once

#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "migrate/protocol.hpp"
#include "nodes/agent.hpp"
#include "nodes/wire.hpp"
#include "sockets/tcp_lock.hpp"

namespace ckpt::nodes {

// Source: the MIGRATE request from cr_job. Reports SENT once the part is
// frozen with its final generation delivered, waits for GO (the address
// moved), then MOVED; any failure before the destination runs the part
// releases it untouched (after cr_job moved the address back).
Status serve_migrate(migrate::FrameWriter& w, migrate::FrameReader& r, const AgentConfig& cfg,
                     const Message& req);

// Destination: a migration stream whose first frame (JOB_BEGIN) is `first`.
Status serve_incoming(migrate::FrameWriter& w, migrate::FrameReader& r, const AgentConfig& cfg,
                      const migrate::Frame& first);

// Removes a directory tree (a staging directory).
void remove_tree(const std::string& dir);

// Destination, asked by cr_job after it lost the source once the address
// had moved: once no incoming migration is in progress here, whether the
// part whose root PID is req.a runs here (RUNNING a = PID) or not (FAILED).
Status serve_where(migrate::FrameWriter& w, const AgentConfig& cfg, const Message& req);

// The connections to peers outside the part saved in a job generation.
Result<std::vector<sockets::Connection>> outside_of_generation(const std::string& gen_dir);

}  // namespace ckpt::nodes
