#include "dump/scratch.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::dump {

namespace {

bool on_tmpfs(const std::string& path) {
  struct statfs fs;
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

std::string parent_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

bool below(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

image::ScratchFile entry(const std::string& path, const struct stat& st) {
  image::ScratchFile f;
  f.path = path;
  f.type = st.st_mode & S_IFMT;
  f.mode = st.st_mode & 07777;
  f.uid = st.st_uid;
  f.gid = st.st_gid;
  return f;
}

// The temporary directories of the process, as the kernel spells them
// (symbolic links resolved, as /proc shows the files): the system's, and
// the TMPDIR it was started with (Open MPI's session directory goes there).
std::vector<std::string> temp_dirs(pid_t pid) {
  std::vector<std::string> names = {"/tmp", "/var/tmp", "/dev/shm", "/run/user"};
  if (auto env = read_file(proc_path(pid, "environ")); env.ok())
    for (size_t at = 0; at < env->size();) {
      size_t end = env->find('\0', at);
      if (end == std::string::npos) end = env->size();
      if (env->compare(at, 7, "TMPDIR=") == 0) names.push_back(env->substr(at + 7, end - at - 7));
      at = end + 1;
    }
  std::vector<std::string> out;
  for (const std::string& n : names) {
    char real[PATH_MAX];
    if (n.empty() || n[0] != '/' || !::realpath(n.c_str(), real)) continue;
    if (std::string(real) != "/") out.push_back(real);
  }
  return out;
}

// What a candidate is: a file held open (or mapped shared), which a
// checkpoint saves or refuses, or one only mapped private (or a directory),
// saved while the budget lasts, or one the process does not hold at all
// (`unheld`: made again at restore only where missing).
struct Candidate {
  std::string path;
  bool held;
  bool unheld = false;
  bool append_only = false;  // held only through O_APPEND descriptors, never mapped shared
};

// When the process started, in seconds since the epoch (0 if unknown).
int64_t start_epoch(pid_t pid) {
  auto stat = read_file(proc_path(pid, "stat"));
  auto sys = read_file("/proc/stat");
  if (!stat.ok() || !sys.ok()) return 0;
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return 0;
  // After ")": field 3 (state) ... field 22, the start in clock ticks since boot.
  const char* p = stat->c_str() + close + 2;
  for (int field = 3; field < 22 && *p; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return 0;
    ++p;
  }
  const unsigned long long ticks = std::strtoull(p, nullptr, 10);
  size_t at = sys->find("btime ");
  if (at == std::string::npos) return 0;
  const long long boot = std::strtoll(sys->c_str() + at + 6, nullptr, 10);
  return boot + int64_t(ticks / uint64_t(::sysconf(_SC_CLK_TCK)));
}

// Regular files right in the process's temporary directories on disk
// (its TMPDIR, /tmp, /var/tmp) that it does not hold, owned by `uid` and
// changed since the process started: what it may have made and will use by
// name (a compiler driver between two steps holds its temporary file's name
// only). Files on tmpfs vanish with the node whoever made them; those it
// holds are candidates already. Read in the freeze and not known to be the
// job's: small ones only, a bounded amount in all (kUnheldMax*).
constexpr uint64_t kUnheldMaxFile = 16ull << 20, kUnheldMaxAll = 64ull << 20;
std::vector<Candidate> unheld_temp_files(pid_t pid, const std::vector<std::string>& temps,
                                         bool any_owner, uint32_t uid) {
  std::vector<Candidate> out;
  const int64_t since = start_epoch(pid);
  if (since == 0) return out;
  for (const std::string& dir : temps) {
    if (dir == "/dev/shm" || dir == "/run/user" || on_tmpfs(dir)) continue;
    DIR* d = ::opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN) continue;
      const std::string path = dir + "/" + e->d_name;
      struct stat st;
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if ((!any_owner && st.st_uid != uid) || st.st_ctim.tv_sec < since) continue;
      if (uint64_t(st.st_size) > kUnheldMaxFile) continue;
      out.push_back({path, false, true});
    }
    ::closedir(d);
  }
  return out;
}

Status read_scratch(const std::string& path, uint64_t size, std::vector<uint8_t>* data) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return sys_error("reading scratch file " + path);
  data->resize(size_t(size));
  return read_exact(fd.get(), data->data(), data->size(), 0, "scratch file " + path);
}

// collect_scratch's walk over the candidates: the budgets, and the entries
// written so far (a directory shared by several files is recorded once).
class ScratchCollector {
 public:
  ScratchCollector(pid_t pid, image::ImageMeta* meta, ScratchSaved* saved, uint64_t max_bytes)
      : pid_(pid),
        meta_(meta),
        saved_(saved),
        max_bytes_(max_bytes),
        temps_(temp_dirs(pid)),
        any_owner_(meta->credentials.empty()),
        fsuid_(any_owner_ ? 0 : meta->credentials.front().uid[3]) {}

  // Every candidate, those the process holds first (they take the budget
  // first).
  std::vector<Candidate> candidates() const;
  // One candidate, recorded with its directories if it is a file of the
  // process in a temporary directory or on tmpfs.
  Status take(const Candidate& c);

 private:
  // The outermost temporary directory `path` is below ("" if none).
  std::string base_of(const std::string& path) const;
  // Its content into `f`, while the budgets last. False: not to be recorded
  // with its directories (left out, or recorded without its content).
  Result<bool> take_content(const Candidate& c, bool tmpfs, const struct stat& st,
                            image::ScratchFile* f);
  // The directories of `path` (itself, if one) not recorded yet.
  Status take_directories(const std::string& path, const struct stat& st, bool tmpfs,
                          const std::string& base);

  const pid_t pid_;
  image::ImageMeta* const meta_;
  ScratchSaved* const saved_;
  const uint64_t max_bytes_;
  const std::vector<std::string> temps_;
  // Only the process's own files (its filesystem uid owns them): another
  // user's file there was not made by the job, and stays reopened by path.
  const bool any_owner_;
  const uint32_t fsuid_;
  std::set<std::string> looked_at_, seen_;  // candidates; entries written
  uint64_t bytes_ = 0, unheld_bytes_ = 0;
};

std::vector<Candidate> ScratchCollector::candidates() const {
  std::vector<Candidate> held, other;
  std::set<std::string> shared_maps, not_appended;
  for (const image::VmaRecord& v : meta_->vmas)
    if (v.is_file() && (v.flags & image::kVmaShared)) shared_maps.insert(v.name);
  for (const image::FileRecord& f : meta_->files)
    if (!(f.flags & O_APPEND)) not_appended.insert(f.path);
  for (const image::FileRecord& f : meta_->files)
    if ((f.kind == image::FileKind::kRegular || f.kind == image::FileKind::kFifo) && f.dup_of == -1)
      held.push_back({f.path, true, false,
                      f.kind == image::FileKind::kRegular && !not_appended.count(f.path) &&
                          !shared_maps.count(f.path)});
  for (const image::VmaRecord& v : meta_->vmas) {
    if (!v.is_file() || (v.flags & (image::kVmaSysv | image::kVmaDelShared))) continue;
    if (v.name.ends_with(" (deleted)")) continue;
    ((v.flags & image::kVmaShared) ? held : other)
        .push_back({v.name, bool(v.flags & image::kVmaShared)});
  }
  // A removed working directory is made again (removed) by the restore.
  if (!meta_->process.cwd.ends_with(" (deleted)")) other.push_back({meta_->process.cwd, false});
  held.insert(held.end(), other.begin(), other.end());  // held ones take the budget first
  for (Candidate& c : unheld_temp_files(pid_, temps_, any_owner_, fsuid_))
    held.push_back(std::move(c));
  return held;
}

std::string ScratchCollector::base_of(const std::string& path) const {
  std::string base;
  for (const std::string& t : temps_)
    if (below(path, t) && (base.empty() || t.size() < base.size())) base = t;
  return base;
}

Status ScratchCollector::take(const Candidate& c) {
  const std::string& path = c.path;
  if (path.empty() || path[0] != '/' || !looked_at_.insert(path).second) return {};
  const bool tmpfs = on_tmpfs(path);
  const std::string base = base_of(path);
  if (!tmpfs && base.empty()) return {};
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    // Another process's temporary file, gone since the listing: nothing to save.
    if (c.unheld) return {};
    return sys_error("scratch file " + path);
  }
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISDIR(st.st_mode)) return {};
  if (!any_owner_ && st.st_uid != fsuid_) return {};
  image::ScratchFile f = entry(path, st);
  // A log the job only appends to (its output file in /tmp, which its
  // launcher and others append to as well) is made again where it is gone
  // but never rolled back: what was appended since the checkpoint stays.
  if (c.unheld || c.append_only) f.flags |= image::kScratchIfMissing;
  CKPT_ASSIGN(const bool with_directories, take_content(c, tmpfs, st, &f));
  if (!with_directories) return {};
  CKPT_TRY(take_directories(path, st, tmpfs, base));
  if (!S_ISDIR(st.st_mode) && seen_.insert(path).second) meta_->scratch.push_back(std::move(f));
  return {};
}

Result<bool> ScratchCollector::take_content(const Candidate& c, bool tmpfs, const struct stat& st,
                                            image::ScratchFile* f) {
  const std::string& path = c.path;
  if (S_ISREG(st.st_mode) && saved_ && saved_->count({st.st_dev, st.st_ino})) {
    f->flags |= image::kScratchContentElsewhere;
  } else if (c.unheld && (bytes_ + uint64_t(st.st_size) > max_bytes_ ||
                          unheld_bytes_ + uint64_t(st.st_size) > kUnheldMaxAll)) {
    return false;  // not known to be the job's: only while the budgets last
  } else if (S_ISREG(st.st_mode) && bytes_ + uint64_t(st.st_size) > max_bytes_) {
    // The metadata holds the content, and a restore reads it into memory.
    // A file on tmpfs vanishes with the node for certain: refused. One on
    // disk outlives a kill: reopened by path, as before.
    if (tmpfs && c.held)
      return make_error(EFBIG, "scratch file " + path + ": files on tmpfs held by PID " +
                                   std::to_string(pid_) + " exceed the " +
                                   std::to_string(max_bytes_ >> 20) +
                                   " MiB a checkpoint saves of them (--scratch-max)");
    f->flags |= image::kScratchNotSaved;
    f->file_size = uint64_t(st.st_size);
    if (seen_.insert(path).second) meta_->scratch.push_back(std::move(*f));
    return false;
  } else if (S_ISREG(st.st_mode)) {
    Status read = read_scratch(path, uint64_t(st.st_size), &f->data);
    // An unheld file may be another process's, removed or cut short meanwhile.
    if (!read.ok() && c.unheld) return false;
    CKPT_TRY(read);
    bytes_ += uint64_t(st.st_size);
    if (c.unheld) unheld_bytes_ += uint64_t(st.st_size);
    if (saved_) saved_->insert({st.st_dev, st.st_ino});
  }
  return true;
}

Status ScratchCollector::take_directories(const std::string& path, const struct stat& st,
                                          bool tmpfs, const std::string& base) {
  // Its directories, outermost first: below the mount point on tmpfs (the
  // mount point stays as it is), below the temporary directory elsewhere
  // (which comes first, to be checked, and made only where missing).
  std::vector<image::ScratchFile> dirs;
  const std::string top = tmpfs ? std::string() : base;
  for (std::string dir = S_ISDIR(st.st_mode) ? path : parent_of(path); dir != "/";
       dir = parent_of(dir)) {
    struct stat ds, ps;
    if (::lstat(dir.c_str(), &ds) != 0 || ::lstat(parent_of(dir).c_str(), &ps) != 0)
      return sys_error("scratch directory " + dir);
    if (tmpfs ? ds.st_dev != ps.st_dev : !below(dir, top)) {
      if (!tmpfs && seen_.insert(dir).second) {
        dirs.insert(dirs.begin(), entry(dir, ds));
        dirs.front().flags |= image::kScratchBase;
      }
      break;
    }
    if (seen_.insert(dir).second) dirs.insert(dirs.begin(), entry(dir, ds));
  }
  for (auto& d : dirs) meta_->scratch.push_back(std::move(d));
  return {};
}

}  // namespace

Status collect_scratch(pid_t pid, image::ImageMeta* meta, ScratchSaved* saved, uint64_t max_bytes) {
  ScratchCollector sc(pid, meta, saved, max_bytes);
  for (const Candidate& c : sc.candidates()) CKPT_TRY(sc.take(c));
  return {};
}

}  // namespace ckpt::dump
