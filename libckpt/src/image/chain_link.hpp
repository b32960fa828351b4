// The chain link (metadata record 22, format version 2): each generation
// names its chain, its own number, its parent and a digest of its parent's
// whole meta.img, and binds its own addr.img by digest. meta.img covers
// addr.img, which covers every content run, so a generation's meta.img
// digest covers the whole generation and, through the parent digest, every
// generation before it. A renamed, copied or swapped generation directory,
// or a generation of another chain, no longer fits and is refused.
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "image/format.hpp"
#include "image/model.hpp"

namespace ckpt::image {

class SnapshotReader;

// Record 22's payload. decode fills `out` and sets out->present.
bool decode_chain_link(ByteReader& r, ChainLink* out);
// Appends record 22 (framing and hash included) to a metadata record stream.
void append_chain_link(const ChainLink& link, std::vector<uint8_t>& stream, uint64_t* nrecords);

// xxh3 of a whole file given as its header bytes and its body.
uint64_t file_digest(const std::vector<uint8_t>& head, const std::vector<uint8_t>& body);

// Checks one generation's own link against its headers (the reader, at open):
// "" when it fits, else why not. `version` is meta.img's format version;
// from version 2 the link is required.
std::string check_own_link(const ImageMeta& meta, uint32_t version, uint64_t addr_digest);

// Checks that the directory `path` (named for generation `expected`) holds
// that generation, and, when `parent` is given, that it is the generation
// `child` was taken on.
Status check_directory_holds(const SnapshotReader& r, uint64_t expected);
Status check_parent_link(const SnapshotReader& child, const SnapshotReader& parent);

}  // namespace ckpt::image
