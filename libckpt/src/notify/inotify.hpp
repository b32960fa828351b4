// inotify instances: the watches a program set (what file, what events,
// which watch descriptor it was given), saved from fdinfo and set again on
// a new instance with the same watch descriptors, so that the program's
// table from wd to file still holds.
//
// Events queued and not yet read at the checkpoint are not carried over:
// the kernel has no way to read them without taking them from the running
// program, nor to queue them again (docs/state.md).
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "util/fd.hpp"

namespace ckpt::notify {

// A restore reaches a watch descriptor by adding and removing watches one
// by one (the kernel offers no other way), about a microsecond each: above
// this one, a checkpoint refuses the instance rather than leave a restore
// that takes minutes.
constexpr int32_t kMaxWatchDescriptor = 1 << 22;

struct Watch {
  int32_t wd = 0;
  uint32_t mask = 0;  // as inotify_add_watch(2) takes it
  std::string path;
};

// The watches of the inotify fd whose fdinfo is `info`, the fd being
// `pid`'s. Each watched file is found by its file handle on the mount of
// its device in `pid`'s mount table (open_by_handle_at: needs
// CAP_DAC_READ_SEARCH). A watch on a file no longer in the tree is refused.
Result<std::vector<Watch>> read_watches(pid_t pid, const std::string& info,
                                        const std::string& what);

// Watches in a record (params: wd, mask, path length per watch; data: the
// paths one after another) and back.
void store_watches(const std::vector<Watch>& watches, image::FileRecord* f);
Result<std::vector<Watch>> load_watches(const image::FileRecord& f, const std::string& what);

// A new instance (with the record's O_NONBLOCK) holding the record's
// watches under their own watch descriptors.
Result<UniqueFd> restore_inotify(const image::FileRecord& f, const std::string& what);

}  // namespace ckpt::notify
