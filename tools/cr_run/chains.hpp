// cr_run's directory: one checkpoint chain per sub-directory
// (DIR/chain-000001, ...), each a full followed by incrementals, since a
// checkpoint directory holds one chain (a new full supersedes the old one).
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace cr_run {

std::string chain_dir(const std::string& dir, uint64_t chain);
// Chain numbers in dir, ascending.
std::vector<uint64_t> list_chains(const std::string& dir);
// Committed generations of a chain, ascending (empty if none or unreadable).
std::vector<uint64_t> generations(const std::string& chain_dir);

struct Point {
  uint64_t chain = 0, generation = 0;  // chain 0: nothing committed anywhere
};
// The newest committed generation of the newest chain that has one.
Point newest_committed(const std::string& dir);

// The number of a new chain: above every chain of both directories (the
// levels of a two-level run; the same directory twice otherwise).
uint64_t next_chain(const std::string& dir, const std::string& other);

// Deletes all chains but the newest `keep` that hold a committed generation
// (and any empty chain older than those). A chain is first renamed away, so
// a half-deleted one never looks like a chain.
void prune(const std::string& dir, uint64_t keep);

}  // namespace cr_run
