// The node protocol between cr_job (the coordinator) and cr_noded (one agent
// per node), spec in docs/nodes.md: the migration stream's frames and
// token authentication (migrate/protocol), then NODE_STEP frames.
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>

#include "migrate/protocol.hpp"

namespace ckpt::nodes {

enum Step : uint32_t {
  // coordinator -> agent
  kCheckpoint = 1,  // a = root PID of the node's part, b = 1 full / 0 incremental
  kGo = 2,          // go on to the next step
  kAbort = 3,       // abort the round: release, make nothing visible
  kRestore = 4,     // a = generation (0: newest)
  kMigrate = 5,     // a = root PID of the part, b = 1 live / 0 frozen, text = destination agent
  kWhere = 6,       // a = root PID: does a part moved here run? RUNNING or FAILED
  // another node -> agent: the partner level (nodes/partner.hpp); text = the part's name
  kStore = 7,  // a = chain, b = generation: HOLDING, then the generations it lacks, each STORED
  kFetch = 8,  // a = chain (0: newest): HOLDING, then its generations from the first
  kQuery = 9,  // HOLDING for the newest chain
  kDrop = 21,  // the job finished: its copies are removed; HOLDING (nothing)
  // agent -> coordinator
  kFrozen = 10,     // every process frozen, connections between nodes locked
  kCaptured = 11,   // state and memory copied; released at the next kGo
  kWritten = 12,    // files durable; visible at the next kGo
  kCommitted = 13,  // a = generation, b = frozen microseconds; text: processes
  kReady = 14,      // a = generation, b = root PID: built, held in repair mode
  kRunning = 15,    // a = root PID: released
  kFailed = 16,     // text: the one-line cause; the round is aborted on this node
  kSent = 17,       // migrate: final generation delivered, part frozen: move the address
  kMoved = 18,      // migrate: a = PID there, b = downtime microseconds; text: stats
  kHolding = 19,    // partner: a = chain, b = its newest generation held (0: none)
  kStored = 20,     // partner: a = chain, b = generation now held
};
const char* step_name(uint32_t s);

struct Message {
  uint32_t step = 0;
  uint64_t a = 0, b = 0;
  std::string text;
};

Status send_step(migrate::FrameWriter& w, const Message& m);
// The next step (an ERROR frame or a closed connection is an error).
Result<Message> read_step(migrate::FrameReader& r, const std::string& peer);
// An agent's report of `m`, then the coordinator's GO (ABORT or anything
// else is an error).
Status report_and_wait(migrate::FrameWriter& w, migrate::FrameReader& r, Message m);
// Reports FAILED with e's message and returns e.
Status fail(migrate::FrameWriter& w, const Error& e);
// A NODE_STEP frame already read.
Result<Message> parse_step(const migrate::Frame& f, const std::string& peer);

}  // namespace ckpt::nodes
