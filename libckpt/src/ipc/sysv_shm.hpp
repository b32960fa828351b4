// SysV shared memory (shmget/shmat) of a job. A segment attached by members
// is saved like shared anonymous memory (content once, by the first member
// in job order that maps it; whole in every incremental), with its key,
// mode, owner, size and IPC_RMID state packed into the VMA record
// (docs/format.md, Vma). At restore the segment is made again in the
// restorer with the same id (kernel.shm_next_id), and every member attaches
// it at its address with an injected shmat(2), so /proc shows
// "/SYSV<key> (deleted)" and shmdt(2) works as before.
#pragma once

#include <ckpt/result.hpp>
#include <map>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "proc/maps.hpp"

namespace ckpt::ipc {

// Whether the mapping `m` is a SysV segment's attachment.
bool is_sysv_mapping(const proc::MapEntry& m);

// Fills `v` for such a mapping (flags kVmaShared | kVmaSysv, ino = shmid,
// dev/file_size/mtime_ns = the segment's key, owner, size and mode). Refuses
// an attachment that is not the whole segment (a part unmapped or
// mprotect()ed differently).
Status collect_sysv(const proc::MapEntry& m, const std::string& where, image::VmaRecord* v);

// The segment's attributes as the VMA record packs them.
struct SysvSegment {
  int32_t id = 0;
  uint32_t key = 0, mode = 0, uid = 0, gid = 0;
  uint64_t size = 0;
  bool removed = false;  // IPC_RMID done: it goes with its last detach
};
SysvSegment sysv_of(const image::VmaRecord& v);

// The segments of a restored job, made in the restorer and attached there
// until every member has attached them (a removed segment would vanish at
// its first detach otherwise).
class SysvSegments {
 public:
  ~SysvSegments();
  Status create(const std::vector<const image::ImageMeta*>& metas);
  // "sysv:ID" by checkpointed shmid, for the address space builder.
  void add_paths(image::SharedPaths* paths) const;

 private:
  std::vector<std::pair<int, void*>> attached_;
  std::map<uint64_t, int> ids_;
};

}  // namespace ckpt::ipc
