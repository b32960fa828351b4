#include "dump/scratch.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>

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

image::ScratchFile entry(const std::string& path, const struct stat& st) {
  image::ScratchFile f;
  f.path = path;
  f.type = st.st_mode & S_IFMT;
  f.mode = st.st_mode & 07777;
  f.uid = st.st_uid;
  f.gid = st.st_gid;
  return f;
}

}  // namespace

Status collect_scratch(pid_t pid, image::ImageMeta* meta, ScratchSaved* saved, uint64_t max_bytes) {
  std::vector<std::string> paths;
  for (const image::FileRecord& f : meta->files)
    if ((f.kind == image::FileKind::kRegular || f.kind == image::FileKind::kFifo) && f.dup_of == -1)
      paths.push_back(f.path);
  for (const image::VmaRecord& v : meta->vmas)
    if (v.is_file() && (v.flags & image::kVmaShared)) paths.push_back(v.name);

  std::set<std::string> seen;
  uint64_t bytes = 0;
  for (const std::string& path : paths) {
    if (path.empty() || path[0] != '/' || !seen.insert(path).second || !on_tmpfs(path)) continue;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return sys_error("scratch file " + path);
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) continue;
    // Its directories below the mount point, outermost first.
    std::vector<image::ScratchFile> dirs;
    for (std::string dir = parent_of(path); dir != "/"; dir = parent_of(dir)) {
      struct stat ds, ps;
      if (::lstat(dir.c_str(), &ds) != 0 || ::lstat(parent_of(dir).c_str(), &ps) != 0)
        return sys_error("scratch directory " + dir);
      if (ds.st_dev != ps.st_dev) break;  // the mount point itself stays as it is
      if (seen.insert(dir).second) dirs.insert(dirs.begin(), entry(dir, ds));
    }
    for (auto& d : dirs) meta->scratch.push_back(std::move(d));
    image::ScratchFile f = entry(path, st);
    if (S_ISREG(st.st_mode) && saved && !saved->insert({st.st_dev, st.st_ino}).second) {
      f.flags |= image::kScratchContentElsewhere;
    } else if (S_ISREG(st.st_mode)) {
      bytes += uint64_t(st.st_size);
      // The metadata holds the content, and a restore reads it into memory.
      if (bytes > max_bytes)
        return make_error(EFBIG, "scratch file " + path + ": files on tmpfs held by PID " +
                                     std::to_string(pid) + " exceed the " +
                                     std::to_string(max_bytes >> 20) +
                                     " MiB a checkpoint saves of them (--scratch-max)");
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd.valid()) return sys_error("reading scratch file " + path);
      f.data.resize(size_t(st.st_size));
      CKPT_TRY(read_exact(fd.get(), f.data.data(), f.data.size(), 0, "scratch file " + path));
    }
    meta->scratch.push_back(std::move(f));
  }
  return {};
}

}  // namespace ckpt::dump
