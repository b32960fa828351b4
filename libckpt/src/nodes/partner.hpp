// The partner level (docs/levels.md): a node's checkpoints copied to the
// agent (cr_noded) of another node, which keeps them in its own store,
// DIR/partners/PART/chain-NNNNNN/gen-NNNNNN, and sends them back to
// whichever node restores the part after this one was lost. PART names the
// copies (one node's part of a job, or one cr_run job); a chain there is
// complete from its full on, each generation checked as a job generation
// before it becomes visible (migrate/job_stream).
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>

#include "migrate/protocol.hpp"
#include "nodes/agent.hpp"
#include "nodes/wire.hpp"

namespace ckpt::nodes {

struct Partner {
  std::string addr;        // the partner's agent, HOST:PORT
  std::string token_file;  // shared with that agent
  std::string part;        // the name the copies are kept under
  double timeout = 30;     // connect, and each read from the agent
};

// A chain and its newest generation (chain 0: nothing).
struct Held {
  uint64_t chain = 0, generation = 0;
};

// Whether `part` may name copies: 1-128 characters of [A-Za-z0-9._-], not
// starting with a dot.
bool valid_part_name(const std::string& part);

// The newest chain the partner holds of p.part and its newest generation.
Result<Held> partner_holds(const Partner& p);

// Brings the partner's copy of chain `chain` up to generation `generation`
// from `chain_dir` (a checkpoint directory holding generations 1 to
// `generation` of that chain): sends the generations the partner lacks, in
// order. A first generation supersedes the part's older chains there (the
// newest earlier one is kept). Returns the bytes of the files sent.
Result<uint64_t> push_to_partner(const Partner& p, const std::string& chain_dir, uint64_t chain,
                                 uint64_t generation);

// Fetches the partner's copy of chain `chain` (0: its newest) into
// `chain_dir`, which is replaced if it exists: received next to it, each
// generation checked, then renamed into place. Returns what was fetched.
Result<Held> fetch_from_partner(const Partner& p, uint64_t chain, const std::string& chain_dir);

// Removes every copy of p.part from the partner (the job finished).
Status drop_at_partner(const Partner& p);

// The agent's side of a STORE, FETCH, QUERY or DROP request (serve_session).
bool is_partner_request(uint32_t step);
Status serve_partner(migrate::FrameWriter& w, migrate::FrameReader& r, const AgentConfig& cfg,
                     const Message& req);

}  // namespace ckpt::nodes
