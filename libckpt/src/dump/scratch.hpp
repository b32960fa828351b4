// Files on tmpfs that a process holds (image/model.hpp ScratchFile): found
// among its open files and shared file mappings, saved whole.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>

#include "image/model.hpp"

namespace ckpt::dump {

// Fills meta->scratch from meta->files and meta->vmas (collected before).
Status collect_scratch(pid_t pid, image::ImageMeta* meta);

}  // namespace ckpt::dump
