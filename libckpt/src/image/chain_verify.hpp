// What `cr_info --verify` checks: everything a restore would read.
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::image {

// For each generation in `gens` (or only `only`, when not 0, which must be
// one of them): it opens, its directory holds that generation, its job.img
// and every member's files are the ones its root's metadata binds, every
// checksum of every member's content holds, and each member's ancestors down
// to the full are present, of the same chain, and are the generations it was
// taken on (chain link digests). Every snapshot is opened and verified once.
Status verify_chains(const std::string& dir, const std::vector<uint64_t>& gens, uint64_t only);

}  // namespace ckpt::image
