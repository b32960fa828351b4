// The privilege rules of a restore (docs/security.md): a restore never gives
// the process more than it had (credentials are restored exactly, never
// inherited from the restorer), and never more than whoever could have
// written the images. When cr_restart runs as root and a non-root user could
// write the images (owns a file or a directory of the chain, or one above
// it), the saved state must be something that user could have: their own
// uid, their groups, no capabilities, no real-time or raised scheduling, no
// resource limit above the restorer's. Otherwise the restore is refused
// before anything is created.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "image/chain.hpp"

namespace ckpt::restore {

// Who could have written a set of paths: non-root owners, and whether a
// group or everybody could.
struct ImageWriters {
  std::set<uid_t> users;           // non-root owners
  std::set<gid_t> owner_groups;    // the groups of the paths those users own
  std::vector<std::string> loose;  // "PATH is writable by group G" / "by everybody"
};

// Examines `dir`, its generation directories and their files (the ones
// `chain` reads), and every directory above `dir`.
Result<ImageWriters> image_writers(const std::string& dir, const image::Chain& chain);

// Whether `meta` asks for nothing the user `uid` could not have had; the
// refusal names the first thing. `allowed_gids`: the user's groups.
Status fits_user(const image::ImageMeta& meta, uid_t uid, const std::set<gid_t>& allowed_gids);

// The rules above for a restore by the calling process.
Status check_image_trust(const std::string& dir, const image::Chain& chain);

}  // namespace ckpt::restore
