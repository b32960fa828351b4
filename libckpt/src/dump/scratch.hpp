// Files on tmpfs that a process holds (image/model.hpp ScratchFile): found
// among its open files and shared file mappings, saved whole.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <set>
#include <utility>

#include "image/model.hpp"

namespace ckpt::dump {

// Files saved so far in this generation (device, inode): a file that
// several members hold is read once.
using ScratchSaved = std::set<std::pair<uint64_t, uint64_t>>;

// Fills meta->scratch from meta->files and meta->vmas (collected before).
// A regular file already in `saved` gets a record without content
// (kScratchContentElsewhere); `saved` may be null (save everything). More
// than `max_bytes` of content: refused, naming the file.
Status collect_scratch(pid_t pid, image::ImageMeta* meta, ScratchSaved* saved, uint64_t max_bytes);

}  // namespace ckpt::dump
