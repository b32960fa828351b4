#include "restore/shared_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "util/text.hpp"

namespace ckpt::restore {

namespace {

// The deleted file's inode again: a memfd of the same name, or a file made
// under its old name and unlinked at once (an unnamed O_TMPFILE in its
// directory if the name is taken).
Result<UniqueFd> make_again(const std::string& path, const std::string& what) {
  if (path.starts_with("/memfd:")) {
    UniqueFd fd(::memfd_create(path.c_str() + 7, MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd.valid()) return sys_error(what + ": making the memfd again");
    return fd;
  }
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.valid()) {
    if (::unlink(path.c_str()) != 0) return sys_error(what + ": unlink");
    return fd;
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  fd.reset(::open(dir.empty() ? "/" : dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return sys_error(what + ": making the deleted file again in " + dir);
  return fd;
}

}  // namespace

// A deleted file (or memfd) mapped shared: made again (make_again), with the
// content a member's fd record carries; the holder's memory then
// writes what the mappings cover.
Status SharedMemory::create_deleted(const std::vector<const image::ImageMeta*>& metas) {
  for (const image::ImageMeta* m : metas)
    for (const image::VmaRecord& v : m->vmas) {
      if (!(v.flags & image::kVmaDelShared)) continue;
      const auto key = std::make_pair(v.dev, v.ino);
      if (deleted_.count(key)) continue;
      std::string path = v.name;
      if (path.size() > 10 && path.compare(path.size() - 10, 10, " (deleted)") == 0)
        path.resize(path.size() - 10);
      const std::string what = "mapping " + hex(v.start) + "-" + hex(v.end) + " " + v.name;
      CKPT_ASSIGN(UniqueFd fd, make_again(path, what));
      const image::FileRecord* rec = nullptr;  // an fd of the same file, with its content
      for (const image::ImageMeta* o : metas)
        for (const image::FileRecord& f : o->files)
          if ((f.kind == image::FileKind::kDeleted || f.kind == image::FileKind::kMemfd) &&
              f.dev == v.dev && f.ino == v.ino && (!rec || !f.data.empty()))
            rec = &f;
      uint64_t bytes = v.file_size;
      if (rec && !rec->data.empty()) {
        CKPT_TRY(write_all(fd.get(), rec->data.data(), rec->data.size(), what));
        bytes = std::max<uint64_t>(bytes, rec->data.size());
      }
      if (::ftruncate(fd.get(), off_t(bytes)) != 0) return sys_error(what + ": ftruncate");
      uint32_t mode = uint32_t(uint64_t(v.mtime_ns) & 07777),
               uid = uint32_t(uint64_t(v.mtime_ns) >> 32);
      uint32_t gid = 0;
      if (rec && rec->params.size() >= image::kDeletedParams)
        gid = uint32_t(rec->params[image::kDeletedGid]);
      if (::fchown(fd.get(), uid, gid) != 0 || ::fchmod(fd.get(), mode) != 0)
        return sys_error(what + ": owner and mode");
      // A memfd's seals, but those against writing (refused at checkpoint
      // time: the mappings could not be filled).
      if (rec && rec->kind == image::FileKind::kMemfd &&
          rec->params.size() >= image::kMemfdParams) {
        const int seals =
            int(rec->params[image::kMemfdSeals]) & ~(F_SEAL_WRITE | F_SEAL_FUTURE_WRITE);
        if (seals && ::fcntl(fd.get(), F_ADD_SEALS, seals) != 0) return sys_error(what + ": seals");
      }
      paths_[*v.shared_object()] =
          "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd.get());
      deleted_[key] = fd.get();
      fds_.push_back(std::move(fd));
    }
  return {};
}

Status SharedMemory::create(const std::vector<const image::ImageMeta*>& metas) {
  std::map<uint64_t, uint64_t> size;  // shared anonymous memory: inode -> bytes mapped
  for (const image::ImageMeta* m : metas)
    for (const image::VmaRecord& v : m->vmas)
      if (auto o = v.shared_object(); o && o->kind == 0)
        size[v.ino] = std::max(size[v.ino], v.pgoff + v.size());
  CKPT_TRY(create_deleted(metas));
  for (auto [ino, bytes] : size) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return sys_error("creating shared memory of " + std::to_string(bytes) + " bytes");
    const uint64_t a = reinterpret_cast<uint64_t>(p);
    const std::string mf = "/proc/self/map_files/" + hex(a, false) + "-" + hex(a + bytes, false);
    UniqueFd fd(::open(mf.c_str(), O_RDWR | O_CLOEXEC));
    Error e = sys_error("opening " + mf);
    ::munmap(p, bytes);
    if (!fd.valid()) return e;
    paths_[image::SharedObject{0, 0, ino}] =
        "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd.get());
    fds_.push_back(std::move(fd));
  }
  CKPT_TRY(sysv_.create(metas));
  sysv_.add_paths(&paths_);
  return {};
}

std::map<image::SharedObject, size_t> shared_memory_holders(
    const std::vector<const image::ImageMeta*>& metas) {
  std::map<image::SharedObject, size_t> out;
  for (size_t i = 0; i < metas.size(); ++i)
    for (const image::VmaRecord& v : metas[i]->vmas)
      if (auto o = v.shared_object()) out.emplace(*o, i);
  return out;
}

void drop_slices(const std::vector<image::MemRange>& ranges, image::RestorePlan* plan) {
  if (ranges.empty()) return;
  auto inside = [&](const image::PlanSlice& sl) {
    for (const image::MemRange& r : ranges)
      if (sl.vaddr >= r.start && sl.vaddr < r.end) return true;
    return false;
  };
  auto& v = plan->slices;
  for (const image::PlanSlice& sl : v)
    if (inside(sl)) plan->pages_written -= sl.npages;
  v.erase(std::remove_if(v.begin(), v.end(), inside), v.end());
}

}  // namespace ckpt::restore
