#include "migrate/job_stream.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"

namespace ckpt::migrate {

namespace {

constexpr size_t kChunk = 4 << 20;  // bytes of a file per JOB_FILE frame
constexpr size_t kMaxPath = 255;

Result<std::vector<std::string>> sorted_entries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return sys_error("listing " + dir);
  std::vector<std::string> out;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

Status send_file(FrameWriter& w, const std::string& gen_dir, const std::string& rel) {
  const std::string path = gen_dir + "/" + rel;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return sys_error("opening " + path);
  std::vector<uint8_t> p;
  uint64_t off = 0;
  for (;;) {
    p.clear();
    put_u32(p, uint32_t(rel.size()));
    p.insert(p.end(), rel.begin(), rel.end());
    put_u64(p, off);
    const size_t head = p.size();
    p.resize(head + kChunk);
    ssize_t n;
    do n = ::pread(fd.get(), p.data() + head, kChunk, off_t(off));
    while (n < 0 && errno == EINTR);
    if (n < 0) return sys_error("reading " + path);
    // An empty file is sent as one empty frame, so that it exists there too.
    if (n == 0 && off > 0) return {};
    p.resize(head + size_t(n));
    CKPT_TRY(w.send(kJobFile, p.data(), p.size()));
    off += uint64_t(n);
    if (n == 0) return {};
  }
}

// "pages.img", "job.img", "member-123/meta.img": at most one directory, names
// of the image's own kind only (no "..", no hidden or absolute paths).
bool safe_name(const std::string& s) {
  if (s.empty() || s.size() > 64 || s[0] == '.') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}
bool safe_path(const std::string& rel) {
  const size_t slash = rel.find('/');
  if (slash == std::string::npos) return safe_name(rel);
  const std::string dir = rel.substr(0, slash), name = rel.substr(slash + 1);
  if (dir.rfind("member-", 0) != 0 || dir.size() == 7 ||
      dir.find_first_not_of("0123456789", 7) != std::string::npos)
    return false;
  return safe_name(name);
}

}  // namespace

Status send_job_generation(FrameWriter& w, const std::string& gen_dir, uint64_t generation) {
  std::vector<uint8_t> g;
  put_u64(g, generation);
  CKPT_TRY(w.send(kJobBegin, g.data(), g.size()));
  CKPT_ASSIGN(std::vector<std::string> top, sorted_entries(gen_dir));
  for (const std::string& e : top) {
    struct stat st;
    if (::lstat((gen_dir + "/" + e).c_str(), &st) != 0)
      return sys_error("stat " + gen_dir + "/" + e);
    if (S_ISREG(st.st_mode)) {
      CKPT_TRY(send_file(w, gen_dir, e));
    } else if (S_ISDIR(st.st_mode)) {
      CKPT_ASSIGN(std::vector<std::string> inner, sorted_entries(gen_dir + "/" + e));
      for (const std::string& f : inner) CKPT_TRY(send_file(w, gen_dir, e + "/" + f));
    } else {
      return make_error(EINVAL, gen_dir + "/" + e + " is neither a file nor a directory");
    }
  }
  return w.send(kJobEnd, g.data(), g.size());
}

JobIncoming::~JobIncoming() {
  files_.clear();
  if (!tmp_.empty()) image::remove_generation_files(tmp_);
}

Status JobIncoming::on_frame(const Frame& f, uint64_t* completed) {
  *completed = 0;
  switch (f.type) {
    case kJobBegin:
      return begin(f);
    case kJobFile:
      return file(f);
    case kJobEnd: {
      CKPT_ASSIGN(*completed, end(f));
      return {};
    }
  }
  return make_error(EBADMSG, std::string("protocol error: ") + frame_name(f.type));
}

Status JobIncoming::begin(const Frame& f) {
  if (in_generation() || f.len != 8)
    return make_error(EBADMSG, "protocol error: misplaced JOB_BEGIN");
  const uint64_t g = get_u64(f.data), want = last_ ? last_ + 1 : first_gen_;
  if (g != want)
    return make_error(EBADMSG, "protocol error: job generation " + std::to_string(g) +
                                   " does not continue the chain (expected " +
                                   std::to_string(want) + ")");
  started_ = true;
  gen_ = g;
  tmp_ = staging_ + "/.tmp-job-" + std::to_string(g);
  if (::mkdir(tmp_.c_str(), 0700) != 0) {
    Status s = sys_error("creating " + tmp_);
    tmp_.clear();
    return s;
  }
  return {};
}

Status JobIncoming::file(const Frame& f) {
  if (!in_generation() || f.len < 12)
    return make_error(EBADMSG, "protocol error: misplaced JOB_FILE");
  const uint32_t n = get_u32(f.data);
  if (n == 0 || n > kMaxPath || f.len < 4 + uint64_t(n) + 8)
    return make_error(EBADMSG, "malformed JOB_FILE frame");
  const std::string rel(reinterpret_cast<const char*>(f.data) + 4, n);
  if (!safe_path(rel)) return make_error(EBADMSG, "JOB_FILE names an unexpected path: " + rel);
  const uint64_t off = get_u64(f.data + 4 + n);
  const uint8_t* bytes = f.data + 4 + n + 8;
  const uint64_t len = f.len - 4 - n - 8;
  auto it = files_.find(rel);
  if (it == files_.end()) {
    if (off != 0) return make_error(EBADMSG, "JOB_FILE " + rel + " does not start at 0");
    if (size_t slash = rel.find('/'); slash != std::string::npos) {
      const std::string d = tmp_ + "/" + rel.substr(0, slash);
      if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return sys_error("creating " + d);
    }
    const std::string path = tmp_ + "/" + rel;
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.valid()) return sys_error("creating " + path);
    it = files_.emplace(rel, Open{std::move(fd), 0}).first;
  } else if (off != it->second.size) {
    return make_error(EBADMSG, "JOB_FILE " + rel + " out of order");
  }
  CKPT_TRY(write_all(it->second.fd.get(), bytes, len, tmp_ + "/" + rel, off_t(off)));
  it->second.size += len;
  return {};
}

Result<uint64_t> JobIncoming::end(const Frame& f) {
  if (!in_generation() || f.len != 8 || get_u64(f.data) != gen_)
    return make_error(EBADMSG, "protocol error: misplaced JOB_END");
  files_.clear();
  // The generation opens as a job: job.img and every member's files, all
  // of this generation and chain, each member continuing the previous one
  // (or new in it). Checked before it is renamed into place, so that no
  // reader of staging ever sees one that does not.
  const std::string dir = tmp_;
  auto bad = [&](const std::string& why) {
    return make_error(EBADMSG, "job generation " + std::to_string(gen_) + ": " + why);
  };
  CKPT_ASSIGN(image::JobMeta jm, image::read_job_or_root(dir));
  if (jm.members.empty() || jm.generation != gen_) return bad("job.img is of another generation");
  if (last_ && jm.chain_id != chain_) return bad("of another chain");
  const pid_t root = jm.members[0].pid;
  for (const image::JobMember& m : jm.members) {
    if (m.zombie()) continue;
    CKPT_ASSIGN(auto r, image::SnapshotReader::open(image::member_dir(dir, m.pid, root)));
    const image::ImageMeta& mm = r->meta();
    if (mm.generation != gen_ || mm.chain_id != jm.chain_id || mm.process.pid != m.pid ||
        (mm.parent_generation != 0 && mm.parent_generation != last_) ||
        (last_ == 0 && mm.parent_generation != 0))
      return bad("the files of member " + std::to_string(m.pid) + " do not match its job.img");
  }
  const std::string final_dir = image::generation_dir(staging_, gen_);
  if (::rename(tmp_.c_str(), final_dir.c_str()) != 0) return sys_error("committing " + final_dir);
  tmp_.clear();
  chain_ = jm.chain_id;
  last_ = gen_;
  return gen_;
}

}  // namespace ckpt::migrate
