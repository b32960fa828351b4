#include "image/chain_link.hpp"

#include "image/reader.hpp"
#include "util/hash.hpp"

namespace ckpt::image {

bool decode_chain_link(ByteReader& r, ChainLink* out) {
  ChainLink l;
  if (!r.u64(&l.generation) || !r.bytes(l.chain_id.data(), 16) || !r.u64(&l.parent_generation) ||
      !r.u64(&l.parent_digest) || !r.u64(&l.addr_digest))
    return false;
  l.present = true;
  *out = l;
  return true;
}

void append_chain_link(const ChainLink& l, std::vector<uint8_t>& stream, uint64_t* nrecords) {
  ByteWriter w;
  w.u32(uint32_t(RecordType::kChainLink));
  w.u32(48);
  w.u64(l.generation);
  w.bytes(l.chain_id.data(), 16);
  w.u64(l.parent_generation);
  w.u64(l.parent_digest);
  w.u64(l.addr_digest);
  const uint64_t h = xxh3(w.data().data(), w.data().size());
  w.u64(h);
  stream.insert(stream.end(), w.data().begin(), w.data().end());
  ++*nrecords;
}

uint64_t file_digest(const std::vector<uint8_t>& head, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> all;
  all.reserve(head.size() + body.size());
  all.insert(all.end(), head.begin(), head.end());
  all.insert(all.end(), body.begin(), body.end());
  return xxh3(all.data(), all.size());
}

std::string check_own_link(const ImageMeta& m, uint32_t version, uint64_t addr_digest) {
  const ChainLink& l = m.link;
  if (!l.present)
    return version >= 2 ? "no chain link record (required from format version 2)" : "";
  if (l.generation != m.generation || l.chain_id != m.chain_id ||
      l.parent_generation != m.parent_generation)
    return "chain link record does not match the generation record";
  if ((l.parent_generation == 0) != (l.parent_digest == 0))
    return "chain link record names no parent digest";
  if (l.addr_digest != addr_digest)
    return "addr.img is not the one this generation's metadata binds (digest mismatch)";
  return "";
}

Status check_directory_holds(const SnapshotReader& r, uint64_t expected) {
  if (r.meta().generation != expected)
    return make_error(EBADMSG, r.path() + ": holds generation " +
                                   std::to_string(r.meta().generation) + ", not " +
                                   std::to_string(expected) + " (renamed or swapped directory?)");
  return {};
}

Status check_parent_link(const SnapshotReader& child, const SnapshotReader& parent) {
  const ChainLink& l = child.meta().link;
  if (!l.present) return {};  // a version-1 generation binds no digest
  if (l.parent_digest != parent.meta_digest())
    return make_error(EBADMSG, child.path() + ": its parent " + parent.path() +
                                   " is not the generation it was taken on (digest mismatch)");
  return {};
}

}  // namespace ckpt::image
