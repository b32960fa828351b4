// Shared anonymous memory of a restored job: one object per checkpointed
// object (by inode), made here in the restorer as MAP_SHARED|MAP_ANONYMOUS
// memory (so /proc shows "/dev/zero (deleted)" again, and the next
// checkpoint sees shared anonymous memory), held open until every member
// has mapped it through /proc/<restorer>/fd/N.
#pragma once

#include <ckpt/result.hpp>
#include <map>
#include <string>
#include <vector>

#include "image/chain.hpp"
#include "image/model.hpp"
#include "ipc/sysv_shm.hpp"
#include "util/fd.hpp"

namespace ckpt::restore {

class SharedMemory {
 public:
  Status create(const std::vector<const image::ImageMeta*>& metas);
  // Object -> the path a member opens to map it ("sysv:ID" for a segment).
  const image::SharedPaths& paths() const { return paths_; }
  // Deleted files mapped shared, made again: (dev, ino) -> fd here, which
  // the members' fds of the same file reopen (SharedFiles::deleted).
  const std::map<std::pair<uint64_t, uint64_t>, int>& deleted_files() const { return deleted_; }

 private:
  Status create_deleted(const std::vector<const image::ImageMeta*>& metas);
  std::vector<UniqueFd> fds_;
  image::SharedPaths paths_;
  ipc::SysvSegments sysv_;  // SysV segments: "sysv:ID" in paths_
  std::map<std::pair<uint64_t, uint64_t>, int> deleted_;
};

// The member that holds the content of each shared object: the first in job
// order that maps it, as at checkpoint time.
std::map<image::SharedObject, size_t> shared_memory_holders(
    const std::vector<const image::ImageMeta*>& metas);

// Removes from `plan` every slice inside `ranges` (sorted, disjoint): pages
// another member writes into the shared object.
void drop_slices(const std::vector<image::MemRange>& ranges, image::RestorePlan* plan);

}  // namespace ckpt::restore
