#include "restore/scratch.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <map>

#include "util/fd.hpp"

namespace ckpt::restore {

namespace {

bool plain_path(const std::string& p) {
  return !p.empty() && p[0] == '/' && p.find("/../") == std::string::npos &&
         p.find("/./") == std::string::npos &&
         p.compare(p.size() < 3 ? 0 : p.size() - 3, 3, "/..") != 0;
}

std::string parent_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

Status put(const image::ScratchFile& f) {
  const std::string what = "scratch file " + f.path;
  if (!plain_path(f.path)) return make_error(EBADMSG, what + ": not a plain absolute path");
  struct statfs fs;
  if (::statfs(parent_of(f.path).c_str(), &fs) != 0) return sys_error(what + ": its directory");
  if (fs.f_type != TMPFS_MAGIC)
    return make_error(EPERM, what + ": its directory is not on tmpfs here");
  const bool root = ::geteuid() == 0;
  struct stat st;
  const bool exists = ::lstat(f.path.c_str(), &st) == 0;
  // An existing entry must be the kind saved and belong to the saved owner:
  // a restore never writes through somebody else's file or link.
  if (exists && ((st.st_mode & S_IFMT) != f.type || st.st_uid != f.uid))
    return make_error(EEXIST, what + ": exists here as another file or owner");
  if (f.type == S_IFDIR) {
    if (!exists && ::mkdir(f.path.c_str(), mode_t(f.mode)) != 0) return sys_error(what);
  } else if (f.type == S_IFIFO) {
    if (!exists && ::mkfifo(f.path.c_str(), mode_t(f.mode)) != 0) return sys_error(what);
  } else if (f.type == S_IFREG) {
    UniqueFd fd(::open(f.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                       mode_t(f.mode)));
    if (!fd.valid()) return sys_error(what);
    CKPT_TRY(write_all(fd.get(), f.data.data(), f.data.size(), what));
    if (root && ::fchown(fd.get(), f.uid, f.gid) != 0) return sys_error(what + ": chown");
    if (::fchmod(fd.get(), mode_t(f.mode)) != 0) return sys_error(what + ": chmod");
    return {};
  } else {
    return make_error(EBADMSG, what + ": unknown type in image");
  }
  if (!exists && root && ::lchown(f.path.c_str(), f.uid, f.gid) != 0)
    return sys_error(what + ": chown");
  return {};
}

}  // namespace

std::set<std::string> scratch_paths(const image::ImageMeta& meta) {
  std::set<std::string> out;
  for (const image::ScratchFile& f : meta.scratch) out.insert(f.path);
  return out;
}

Status restore_scratch(const std::vector<const image::ImageMeta*>& metas) {
  // A file several members hold has its content in one member's record.
  std::map<std::string, const image::ScratchFile*> with_content;
  for (const image::ImageMeta* m : metas)
    for (const image::ScratchFile& f : m->scratch)
      if (!(f.flags & image::kScratchContentElsewhere)) with_content.emplace(f.path, &f);
  std::set<std::string> done;
  for (const image::ImageMeta* m : metas)
    for (const image::ScratchFile& f : m->scratch) {
      if (!done.insert(f.path).second) continue;
      auto it = with_content.find(f.path);
      if (it == with_content.end())
        return make_error(EBADMSG, "scratch file " + f.path + ": no member saved its content");
      CKPT_TRY(put(*it->second));
    }
  return {};
}

}  // namespace ckpt::restore
