#include "restore/shared_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "util/text.hpp"

namespace ckpt::restore {

Status SharedMemory::create(const std::vector<const image::ImageMeta*>& metas) {
  std::map<uint64_t, uint64_t> size;  // inode -> bytes the mappings reach
  for (const image::ImageMeta* m : metas)
    for (const image::VmaRecord& v : m->vmas)
      if (v.is_shared_anon() && v.ino && !(v.flags & image::kVmaSysv))
        size[v.ino] = std::max(size[v.ino], v.pgoff + v.size());
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
    paths_[ino] = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fd.get());
    fds_.push_back(std::move(fd));
  }
  CKPT_TRY(sysv_.create(metas));
  sysv_.add_paths(&paths_);
  return {};
}

std::map<uint64_t, size_t> shared_memory_holders(
    const std::vector<const image::ImageMeta*>& metas) {
  std::map<uint64_t, size_t> out;
  for (size_t i = 0; i < metas.size(); ++i)
    for (const image::VmaRecord& v : metas[i]->vmas)
      if (v.is_shared_anon() && v.ino) out.emplace(v.ino, i);
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
