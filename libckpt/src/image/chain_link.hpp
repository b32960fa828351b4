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
#include "image/job_image.hpp"
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

// The generation's job.img (`job`, as read: !job.from_file when it has none)
// against its root's snapshot: the same generation and chain, the same root
// process and, where the root's chain link binds job.img, its digest (a
// job.img missing, added, or taken from another generation is refused).
Status check_job_link(const SnapshotReader& root, const JobMeta& job);
// A member's snapshot against what job.img binds of it (its meta.img digest,
// and its PID). `job_bound`: the root's link binds job.img, so every member's
// digest must be there.
Status check_member_link(const SnapshotReader& member, const JobMember& m, bool job_bound);

// The generation's members: its job.img, or for a generation without one a
// job of one described from its root `root`; checked with check_job_link.
Result<JobMeta> read_bound_job(const SnapshotReader& root);

}  // namespace ckpt::image
