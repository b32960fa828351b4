// Puts back the tmpfs files of a job (image/model.hpp ScratchFile) before any
// member opens or maps them: directories made where missing, files written
// with their saved content, FIFOs made where missing.
#pragma once

#include <ckpt/result.hpp>
#include <set>
#include <string>
#include <vector>

#include "image/model.hpp"

namespace ckpt::restore {

// The paths the restore rewrites itself (exempt from the unchanged-file check).
std::set<std::string> scratch_paths(const image::ImageMeta& meta);

// Each path once, from the first member that has it.
Status restore_scratch(const std::vector<const image::ImageMeta*>& metas);

}  // namespace ckpt::restore
