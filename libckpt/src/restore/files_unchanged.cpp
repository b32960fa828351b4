// Restore side of files on disk: are the files a process used still the
// ones it used (docs/state.md, "Files changed on disk")?
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <set>
#include <string>

#include "restore/files.hpp"
#include "restore/scratch.hpp"
#include "util/text.hpp"

namespace ckpt::restore {

using image::FileKind;
using image::FileRecord;

Status check_files_unchanged(const image::ImageMeta& meta, bool force) {
  struct Use {
    std::string who;
    uint64_t dev, ino, size;
    int64_t mtime_ns;
    bool writable;
  };
  std::map<std::string, Use> uses;  // by path; the first user names it
  auto add = [&](const std::string& path, const std::string& who, uint64_t dev, uint64_t ino,
                 uint64_t size, int64_t mtime, bool writable) {
    auto [it, fresh] = uses.emplace(path, Use{who, dev, ino, size, mtime, writable});
    if (!fresh) it->second.writable |= writable;
  };
  for (const FileRecord& f : meta.files)
    if (f.kind == FileKind::kRegular && f.dup_of == -1)
      add(f.path, "fd " + std::to_string(f.fd), f.dev, f.ino, f.size, f.mtime_ns,
          (f.flags & O_ACCMODE) != O_RDONLY);
  for (const image::VmaRecord& v : meta.vmas)
    if (v.is_file())
      add(v.name, "mapping " + hex(v.start) + "-" + hex(v.end), v.dev, v.ino, v.file_size,
          v.mtime_ns, (v.flags & image::kVmaShared) && (v.prot & 2 /* PROT_WRITE */));

  const std::set<std::string> scratch = scratch_paths(meta);  // put back by the restore itself
  // A file that is gone (--force cannot help): what, and why the checkpoint
  // did not keep it.
  auto missing = [&](const std::string& what, const std::string& path) -> Status {
    if (errno != ENOENT && errno != ENOTDIR) return sys_error(what);
    std::string why;
    if (const image::ScratchFile* big = not_saved(meta, path))
      why = "its " + std::to_string(big->file_size) +
            " bytes were more than was left of what a checkpoint saves of a process's files "
            "in temporary directories (--scratch-max)";
    else
      why =
          "only files on tmpfs or in a temporary directory (/tmp, /var/tmp, the job's "
          "TMPDIR) are saved, others are reopened by path";
    return make_error(ENOENT,
                      what + ": no longer exists, and the checkpoint did not save it: " + why);
  };
  struct stat st;
  const std::string& cwd = meta.process.cwd;
  if (!cwd.empty() && cwd[0] == '/' && !scratch.count(cwd) && !cwd.ends_with(" (deleted)") &&
      ::stat(cwd.c_str(), &st) != 0)
    return missing("working directory " + cwd, cwd);
  for (const FileRecord& f : meta.files)  // FIFOs hold no content to compare, only a name
    if (f.kind == FileKind::kFifo && f.dup_of == -1 && !scratch.count(f.path) &&
        ::stat(f.path.c_str(), &st) != 0)
      return missing("fd " + std::to_string(f.fd) + ": " + f.path, f.path);
  for (const auto& [path, u] : uses) {
    const std::string what = u.who + ": " + path;
    if (scratch.count(path)) continue;
    // Kernel pseudo files are made anew for each process and boot.
    if (path.rfind("/proc/", 0) == 0 || path.rfind("/sys/", 0) == 0) continue;
    if (::stat(path.c_str(), &st) != 0) return missing(what, path);
    if (S_ISDIR(st.st_mode)) continue;  // a directory's entries are not its content
    std::string change;
    if (uint64_t(st.st_dev) == u.dev && uint64_t(st.st_ino) != u.ino) {
      change = "replaced by another file (inode " + std::to_string(st.st_ino) + ", was " +
               std::to_string(u.ino) + ")";
    } else if (u.writable) {
      // The process writes this file itself and may have gone on writing
      // after the checkpoint; it rewrites from its saved offset. Only a file
      // shorter than it was is a change it cannot survive.
      if (uint64_t(st.st_size) < u.size)
        change = "size now " + std::to_string(st.st_size) + " bytes, was " + std::to_string(u.size);
    } else if (uint64_t(st.st_size) != u.size) {
      change = "size now " + std::to_string(st.st_size) + " bytes, was " + std::to_string(u.size);
    } else if (mtime_ns(st) != u.mtime_ns) {
      change = "modified (mtime differs, same size)";
    }
    if (!change.empty() && !force)
      return make_error(ESTALE, what + ": changed on disk since the checkpoint: " + change +
                                    "; use --force to restore anyway");
  }
  return {};
}

}  // namespace ckpt::restore
