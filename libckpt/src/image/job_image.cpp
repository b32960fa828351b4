#include "image/job_image.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include "image/chain_link.hpp"
#include "util/fd.hpp"
#include "util/hash.hpp"

namespace ckpt::image {

std::string member_dir(const std::string& gen_dir, pid_t pid, pid_t root) {
  return pid == root ? gen_dir : gen_dir + "/member-" + std::to_string(pid);
}

Status write_job_file(const std::string& gen_dir, const JobMeta& job, bool durable,
                      uint64_t* digest) {
  ByteWriter body;
  uint64_t n = 0;
  for (const JobMember& m : job.members) {
    ByteWriter w;
    for (int32_t v : {m.pid, m.ppid, m.pgid, m.sid}) w.i32(v);
    w.u32(m.flags);
    w.i32(m.exit_status);
    w.u64(m.meta_digest);
    append_record(body, RecordType::kJobMember, w, &n);
  }
  for (const JobShare& s : job.shares) {
    ByteWriter w;
    for (int32_t v : {s.pid, s.fd, s.owner_pid, s.owner_fd}) w.i32(v);
    append_record(body, RecordType::kJobShare, w, &n);
  }
  FileHeader h;
  h.magic = kJobMagic;
  h.header_size = kSmallHeaderSize;
  h.generation = job.generation;
  h.chain_id = job.chain_id;
  h.count = n;
  std::vector<uint8_t> head = encode_header(h);
  const std::string path = gen_dir + "/" + kJobFile;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return sys_error("creating " + path);
  CKPT_TRY(write_all(fd.get(), head.data(), head.size(), path));
  CKPT_TRY(write_all(fd.get(), body.data().data(), body.data().size(), path));
  if (durable && ::fsync(fd.get()) != 0) return sys_error("fsync " + path);
  if (digest) *digest = file_digest(head, body.data());
  return {};
}

Result<JobMeta> read_job_file(const std::string& gen_dir) {
  const std::string path = gen_dir + "/" + kJobFile;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return make_error(ENOENT, path + ": no job file");
    return sys_error("opening " + path);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return sys_error("stat " + path);
  if (st.st_size > (64 << 20)) return make_error(EBADMSG, path + ": implausibly large");
  std::vector<uint8_t> all(size_t(st.st_size));
  CKPT_TRY(read_exact(fd.get(), all.data(), all.size(), 0, path));
  FileHeader h;
  std::string err;
  if (!decode_header(all.data(), all.size(), kJobMagic, &h, &err))
    return make_error(EBADMSG, path + ": " + err);
  JobMeta job;
  job.from_file = true;
  job.file_digest = xxh3(all.data(), all.size());
  job.generation = h.generation;
  job.chain_id = h.chain_id;
  auto record = [&](RecordType type, ByteReader& r) {
    if (type == RecordType::kJobMember) {
      JobMember m;
      bool ok = r.i32(&m.pid) && r.i32(&m.ppid) && r.i32(&m.pgid) && r.i32(&m.sid) &&
                r.u32(&m.flags) && r.i32(&m.exit_status) && m.pid > 0;
      if (ok && r.left() > 0) ok = r.u64(&m.meta_digest);  // appended
      job.members.push_back(m);
      return ok;
    }
    if (type == RecordType::kJobShare) {
      JobShare s;
      bool ok = r.i32(&s.pid) && r.i32(&s.fd) && r.i32(&s.owner_pid) && r.i32(&s.owner_fd);
      job.shares.push_back(s);
      return ok;
    }
    return false;
  };
  if (!for_each_record(all.data() + h.header_size, all.size() - h.header_size, h.count, "job file",
                       record, &err))
    return make_error(EBADMSG, path + ": " + err);
  if (job.members.empty() || job.members[0].zombie())
    return make_error(EBADMSG, path + ": no live root process");
  return job;
}

}  // namespace ckpt::image
