// Puts back the files of a job that may have vanished with it (image/model.hpp
// ScratchFile: on tmpfs, or in a temporary directory) before any member opens
// or maps them: directories made where missing, files written with their
// saved content, FIFOs made where missing. Only below a temporary directory
// the image names, or on tmpfs.
#pragma once

#include <ckpt/result.hpp>
#include <set>
#include <string>
#include <vector>

#include "image/model.hpp"

namespace ckpt::restore {

// The paths the restore rewrites itself (exempt from the unchanged-file check).
std::set<std::string> scratch_paths(const image::ImageMeta& meta);

// The record of a file in a temporary directory that was too large to save
// (kScratchNotSaved), or null.
const image::ScratchFile* not_saved(const image::ImageMeta& meta, const std::string& path);

// Each path once, from the first member that has it.
Status restore_scratch(const std::vector<const image::ImageMeta*>& metas);

}  // namespace ckpt::restore
