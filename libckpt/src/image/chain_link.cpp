#include "image/chain_link.hpp"

#include "image/reader.hpp"
#include "util/hash.hpp"

namespace ckpt::image {

bool decode_chain_link(ByteReader& r, ChainLink* out) {
  ChainLink l;
  if (!r.u64(&l.generation) || !r.bytes(l.chain_id.data(), 16) || !r.u64(&l.parent_generation) ||
      !r.u64(&l.parent_digest) || !r.u64(&l.addr_digest))
    return false;
  if (r.left() > 0) {  // appended: absent in images written before job.img was bound
    if (!r.u64(&l.job_digest)) return false;
    l.binds_job = true;
  }
  l.present = true;
  *out = l;
  return true;
}

void append_chain_link(const ChainLink& l, std::vector<uint8_t>& stream, uint64_t* nrecords) {
  ByteWriter w;
  w.u32(uint32_t(RecordType::kChainLink));
  w.u32(l.binds_job ? 56 : 48);
  w.u64(l.generation);
  w.bytes(l.chain_id.data(), 16);
  w.u64(l.parent_generation);
  w.u64(l.parent_digest);
  w.u64(l.addr_digest);
  if (l.binds_job) w.u64(l.job_digest);
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

Status check_job_link(const SnapshotReader& root, const JobMeta& job) {
  const ImageMeta& m = root.meta();
  const ChainLink& l = m.link;
  const std::string path = root.path() + "/" + kJobFile;
  if (job.from_file) {
    if (job.generation != m.generation || job.chain_id != m.chain_id)
      return make_error(EBADMSG, path + ": belongs to another checkpoint than " + root.path());
    if (job.members.empty() || job.members[0].pid != m.process.pid)
      return make_error(
          EBADMSG, path + ": names another root process than " + root.path() + "/" + kMetaFile);
  }
  if (!l.binds_job) return {};  // written before job.img was bound: only the checks above
  if (!job.from_file && l.job_digest != 0)
    return make_error(ENOENT, path + ": missing (the generation's metadata binds one)");
  if (job.from_file && l.job_digest == 0)
    return make_error(EBADMSG, path + ": the generation's metadata binds none (added?)");
  if (job.from_file && job.file_digest != l.job_digest)
    return make_error(EBADMSG,
                      path + ": is not the one this generation's metadata binds (digest mismatch)");
  return {};
}

Status check_member_link(const SnapshotReader& member, const JobMember& m, bool job_bound) {
  if (member.meta().process.pid != m.pid)
    return make_error(EBADMSG, member.path() + ": holds the images of PID " +
                                   std::to_string(member.meta().process.pid) + ", not of member " +
                                   std::to_string(m.pid));
  if (m.meta_digest == 0 && !job_bound) return {};  // a job.img written before members were bound
  if (m.meta_digest != member.meta_digest())
    return make_error(EBADMSG, member.path() + "/" + kMetaFile +
                                   ": is not the one job.img binds (digest mismatch)");
  return {};
}

Result<JobMeta> read_bound_job(const SnapshotReader& root) {
  auto job = read_job_file(root.path());
  if (!job.ok() && job.error().code != ENOENT) return job.error();
  JobMeta one;
  if (!job.ok()) {
    one.generation = root.meta().generation;
    one.chain_id = root.meta().chain_id;
    JobMember m;
    m.pid = root.meta().process.pid;
    one.members.push_back(m);
  }
  const JobMeta& j = job.ok() ? *job : one;
  CKPT_TRY(check_job_link(root, j));
  return j;
}

}  // namespace ckpt::image
