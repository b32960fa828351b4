// Making a job's SysV segments again (sysv_shm.hpp). The program may know a
// segment by its id (UCX sends shmids to its peers, which attach them
// later), so the id is asked for through kernel.shm_next_id; a restore that
// cannot have it is refused naming it.
#include <fcntl.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cstring>

#include "ipc/sysv_shm.hpp"
#include "util/fd.hpp"

namespace ckpt::ipc {

namespace {

Status set_next_id(int id) {
  UniqueFd f(::open("/proc/sys/kernel/shm_next_id", O_WRONLY | O_CLOEXEC));
  if (!f.valid()) return sys_error("opening /proc/sys/kernel/shm_next_id");
  const std::string s = std::to_string(id);
  if (::write(f.get(), s.data(), s.size()) != ssize_t(s.size()))
    return sys_error("setting kernel.shm_next_id");
  return {};
}

}  // namespace

SysvSegments::~SysvSegments() {
  for (auto [id, addr] : attached_) ::shmdt(addr);
}

Status SysvSegments::create(const std::vector<const image::ImageMeta*>& metas) {
  std::map<uint64_t, SysvSegment> segs;
  for (const image::ImageMeta* m : metas)
    for (const image::VmaRecord& v : m->vmas)
      if (v.flags & image::kVmaSysv) segs.emplace(v.ino, sysv_of(v));
  for (const auto& [old, s] : segs) {
    const std::string what = "SysV segment " + std::to_string(s.id);
    shmid_ds ds{};
    if (::shmctl(s.id, IPC_STAT, &ds) == 0) {
      // The killed job's own segment, kept by its key: nothing attaches it
      // any more, and its content is newer than the checkpoint's.
      if (ds.shm_nattch != 0 || uint32_t(ds.shm_perm.__key) != s.key)
        return make_error(EEXIST, what + ": the id is taken by another segment (key " +
                                      std::to_string(uint32_t(ds.shm_perm.__key)) + ", " +
                                      std::to_string(ds.shm_nattch) + " attached)");
      if (::shmctl(s.id, IPC_RMID, nullptr) != 0) return sys_error(what + ": removing the old one");
    }
    CKPT_TRY(set_next_id(s.id));
    const key_t key = s.removed ? IPC_PRIVATE : key_t(s.key);
    int id = ::shmget(key, s.size, int(s.mode) | IPC_CREAT | IPC_EXCL);
    if (id < 0) {
      Error e = sys_error(what + ": creating it again (key " + std::to_string(s.key) + ")");
      (void)set_next_id(-1);
      return e;
    }
    void* at = ::shmat(id, nullptr, 0);
    if (at == reinterpret_cast<void*>(-1)) {
      Error e = sys_error(what + ": attaching it in the restorer");
      ::shmctl(id, IPC_RMID, nullptr);
      return e;
    }
    attached_.push_back({id, at});
    if (id != s.id) {
      ::shmctl(id, IPC_RMID, nullptr);
      return make_error(EEXIST, what + ": could not have the same id again (got " +
                                    std::to_string(id) + "): the program may know it by id");
    }
    shmid_ds set{};
    set.shm_perm.uid = s.uid;
    set.shm_perm.gid = s.gid;
    set.shm_perm.mode = s.mode;
    if (::shmctl(id, IPC_SET, &set) != 0) return sys_error(what + ": setting owner and mode");
    // Linux lets members attach a segment marked for removal; it goes with
    // its last detach, as before.
    if (s.removed && ::shmctl(id, IPC_RMID, nullptr) != 0) return sys_error(what + ": IPC_RMID");
    ids_[old] = id;
  }
  return {};
}

void SysvSegments::add_paths(image::SharedPaths* paths) const {
  for (auto [old, id] : ids_)
    (*paths)[image::SharedObject{image::kVmaSysv, 0, uint64_t(old)}] = "sysv:" + std::to_string(id);
}

}  // namespace ckpt::ipc
