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

// An existing entry must be the kind saved and belong to the saved owner:
// a restore never writes through somebody else's file or link.
Status check_existing(const image::ScratchFile& f, const struct stat& st, const std::string& what) {
  if ((st.st_mode & S_IFMT) != f.type || st.st_uid != f.uid)
    return make_error(EEXIST, what + ": exists here as another file or owner");
  return {};
}

// A directory or FIFO made where missing. Made meanwhile by someone else (the
// restore of another node's part on this host shares its tmpfs) is as good
// as found: it is checked the same way.
Status make_node(const image::ScratchFile& f, const std::string& what) {
  const bool dir = f.type == S_IFDIR;
  const int r =
      dir ? ::mkdir(f.path.c_str(), mode_t(f.mode)) : ::mkfifo(f.path.c_str(), mode_t(f.mode));
  struct stat st;
  if (r != 0 && errno == EEXIST && ::lstat(f.path.c_str(), &st) == 0)
    return check_existing(f, st, what);
  if (r != 0) return sys_error(what);
  if (::geteuid() == 0 && ::lchown(f.path.c_str(), f.uid, f.gid) != 0)
    return sys_error(what + ": chown");
  return {};
}

// Whether the file at `fd` holds exactly `data`.
bool same_content(int fd, const std::vector<uint8_t>& data) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) != data.size()) return false;
  std::vector<uint8_t> now(data.size());
  return read_exact(fd, now.data(), now.size(), 0, "").ok() && now == data;
}

// A regular file gets its saved content, in a file made here or in one that
// exists and passes the check on its open descriptor (no window between the
// check and the write). One that holds that content already is left as it
// is: it may be an executable that runs (a write would fail, ETXTBSY).
Status put_file(const image::ScratchFile& f, const std::string& what) {
  const int flags = O_WRONLY | O_NOFOLLOW | O_CLOEXEC;
  UniqueFd fd(::open(f.path.c_str(), flags | O_CREAT | O_EXCL, mode_t(f.mode)));
  if (!fd.valid() && errno == EEXIST) {
    UniqueFd rd(::open(f.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    struct stat st;
    if (!rd.valid() || ::fstat(rd.get(), &st) != 0) return sys_error(what);
    CKPT_TRY(check_existing(f, st, what));
    if (same_content(rd.get(), f.data)) {
      if ((st.st_mode & 07777) != f.mode && ::fchmod(rd.get(), mode_t(f.mode)) != 0)
        return sys_error(what + ": chmod");
      return {};
    }
    fd.reset(::open(f.path.c_str(), flags | O_NONBLOCK));
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) return sys_error(what);
    CKPT_TRY(check_existing(f, st, what));
    if (::ftruncate(fd.get(), 0) != 0) return sys_error(what + ": truncate");
  }
  if (!fd.valid()) return sys_error(what);
  CKPT_TRY(write_all(fd.get(), f.data.data(), f.data.size(), what));
  if (::geteuid() == 0 && ::fchown(fd.get(), f.uid, f.gid) != 0) return sys_error(what + ": chown");
  if (::fchmod(fd.get(), mode_t(f.mode)) != 0) return sys_error(what + ": chmod");
  return {};
}

bool below(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

// A temporary directory the job's files are below: made where missing, left
// as it is where it exists.
Status put_base(const image::ScratchFile& f, const std::string& what) {
  if (f.type != S_IFDIR)
    return make_error(EBADMSG, what + ": a temporary directory that is not one");
  struct stat st;
  if (::lstat(f.path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return make_error(EEXIST, what + ": exists here, not as a directory");
    return {};
  }
  // Its owner was not checked against who could write the images: no
  // set-id bits from them.
  image::ScratchFile made = f;
  made.mode &= 01777;
  return make_node(made, what);
}

// Written only below a temporary directory the image names, or on tmpfs.
Status put(const image::ScratchFile& f, const std::set<std::string>& bases) {
  const std::string what = "scratch file " + f.path;
  if (!plain_path(f.path)) return make_error(EBADMSG, what + ": not a plain absolute path");
  if (f.flags & image::kScratchNotSaved) return {};  // reopened by path
  if (f.flags & image::kScratchBase) return put_base(f, what);
  struct stat found;
  if ((f.flags & image::kScratchIfMissing) && ::lstat(f.path.c_str(), &found) == 0)
    return {};  // not the job's to change: whoever has it now keeps it
  bool in_base = false;
  for (const std::string& b : bases) in_base |= below(f.path, b);
  struct statfs fs;
  if (!in_base) {
    if (::statfs(parent_of(f.path).c_str(), &fs) != 0) return sys_error(what + ": its directory");
    if (fs.f_type != TMPFS_MAGIC)
      return make_error(EPERM, what + ": its directory is not on tmpfs here");
  }
  if (f.type != S_IFREG && f.type != S_IFDIR && f.type != S_IFIFO)
    return make_error(EBADMSG, what + ": unknown type in image");
  // Checked up front as well: a FIFO where a file was saved would otherwise
  // fail its open with a less telling error.
  struct stat st;
  const bool exists = ::lstat(f.path.c_str(), &st) == 0;
  if (exists) CKPT_TRY(check_existing(f, st, what));
  if (f.type == S_IFREG) return put_file(f, what);
  return exists ? Status{} : make_node(f, what);
}

}  // namespace

std::set<std::string> scratch_paths(const image::ImageMeta& meta) {
  std::set<std::string> out;
  for (const image::ScratchFile& f : meta.scratch)
    if (!(f.flags & image::kScratchNotSaved)) out.insert(f.path);
  return out;
}

const image::ScratchFile* not_saved(const image::ImageMeta& meta, const std::string& path) {
  for (const image::ScratchFile& f : meta.scratch)
    if ((f.flags & image::kScratchNotSaved) && f.path == path) return &f;
  return nullptr;
}

Status restore_scratch(const std::vector<const image::ImageMeta*>& metas) {
  // A file several members hold has its content in one member's record.
  std::map<std::string, const image::ScratchFile*> with_content;
  // A member that could not save a file (its budget) defers to one that did.
  for (bool take_unsaved : {false, true})
    for (const image::ImageMeta* m : metas)
      for (const image::ScratchFile& f : m->scratch)
        if (!(f.flags & image::kScratchContentElsewhere) &&
            bool(f.flags & image::kScratchNotSaved) == take_unsaved)
          with_content.emplace(f.path, &f);
  std::set<std::string> done, bases;
  for (const image::ImageMeta* m : metas)
    for (const image::ScratchFile& f : m->scratch)
      if ((f.flags & image::kScratchBase) && plain_path(f.path)) bases.insert(f.path);
  for (const image::ImageMeta* m : metas)
    for (const image::ScratchFile& f : m->scratch) {
      if (!done.insert(f.path).second) continue;
      auto it = with_content.find(f.path);
      if (it == with_content.end())
        return make_error(EBADMSG, "scratch file " + f.path + ": no member saved its content");
      CKPT_TRY(put(*it->second, bases));
    }
  return {};
}

}  // namespace ckpt::restore
