// Describing a SysV segment a frozen member has attached (sysv_shm.hpp).
#include <sys/shm.h>

#include "ipc/sysv_shm.hpp"

namespace ckpt::ipc {

bool is_sysv_mapping(const proc::MapEntry& m) {
  // The inode is the segment id: 0 for the first segment of a fresh IPC namespace.
  return m.shared && m.path.rfind("/SYSV", 0) == 0;
}

Status collect_sysv(const proc::MapEntry& m, const std::string& where, image::VmaRecord* v) {
  shmid_ds ds{};
  // The mapping's inode is the segment's id.
  if (::shmctl(int(m.inode), IPC_STAT, &ds) != 0)
    return sys_error(where + ": reading SysV segment " + std::to_string(m.inode) +
                     " (the checkpoint must run in the job's IPC namespace)");
  const uint64_t size = ds.shm_segsz;
  const uint64_t pages = (size + image::kPageSize - 1) & ~(image::kPageSize - 1);
  if (m.offset != 0 || m.end - m.start != pages)
    return make_error(ENOTSUP, where + ": a part of SysV segment " + std::to_string(m.inode) +
                                   " (" + std::to_string(size) +
                                   " bytes), not the whole attachment: not supported yet");
  v->flags |= image::kVmaShared | image::kVmaSysv;
  v->ino = m.inode;
  v->pgoff = 0;
  v->dev = uint64_t(uint32_t(ds.shm_perm.__key)) | (uint64_t(ds.shm_perm.gid) << 32);
  v->file_size = size;
  const bool removed = ds.shm_perm.mode & SHM_DEST;
  v->mtime_ns = int64_t((ds.shm_perm.mode & 0777) | (removed ? 1u << 16 : 0) |
                        (uint64_t(ds.shm_perm.uid) << 32));
  return {};
}

SysvSegment sysv_of(const image::VmaRecord& v) {
  SysvSegment s;
  s.id = int32_t(v.ino);
  s.key = uint32_t(v.dev);
  s.gid = uint32_t(v.dev >> 32);
  s.size = v.file_size;
  s.mode = uint32_t(v.mtime_ns) & 0777;
  s.removed = (uint64_t(v.mtime_ns) >> 16) & 1;
  s.uid = uint32_t(uint64_t(v.mtime_ns) >> 32);
  return s;
}

}  // namespace ckpt::ipc
