// A checkpoint directory: one sub-directory per committed generation
// ("gen-000001", ...). A generation becomes visible only by the atomic
// rename of its fully written and fsynced temporary directory.
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::image {

std::string generation_dir(const std::string& dir, uint64_t generation);
// Committed generations in DIR, ascending. A missing DIR is an error.
Result<std::vector<uint64_t>> list_generations(const std::string& dir);
// Creates DIR (mode 0700) if it does not exist yet.
Status ensure_dir(const std::string& dir);
// Where a writer of this process builds `generation` before the rename:
// DIR/.tmp-GEN-HOST-PID.
std::string temp_dir_name(const std::string& dir, uint64_t generation);
// This host's name as used in temporary directory names.
std::string temp_prefix_host();
// Removes temporary directories left by this host's writers that died (PID
// gone): they never became visible, but take space. Other hosts' temporaries
// (a shared directory) are left alone. Also removes what
// remove_stale_removals does.
void remove_stale_temps(const std::string& dir);
// Removes a generation's directory and what a generation holds in it (the
// three files, job.img, members' directories); anything else stays.
void remove_generation_files(const std::string& gen_dir);
// Deletes the generations older than `generation`: the chain a new full
// checkpoint superseded (called only once that full is committed). Each is
// first renamed to DIR/.removing-GEN-HOST-PID (atomically: a generation's
// name never shows part of one), newest first, then deleted.
void remove_generations_before(const std::string& dir, uint64_t generation);
// Deletes the DIR/.removing-* directories of removals that were interrupted.
void remove_stale_removals(const std::string& dir);
constexpr const char* kRemovalPrefix = ".removing-";
// fsync of a directory, so a rename inside it is durable.
Status fsync_dir(const std::string& dir);

}  // namespace ckpt::image
