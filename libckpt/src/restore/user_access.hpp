// A root restore of a user's images opens files for the process: each must be
// one the checkpointed process itself could open (docs/security.md), or an
// edited image could have root hand a user /etc/shadow.
#pragma once

#include <ckpt/result.hpp>
#include <set>
#include <string>

#include "image/model.hpp"

namespace ckpt::restore {

// Checks every path the restore opens or maps for `meta`'s process (files
// by path, mapped files, the working directory) with the access it needs,
// as the process's own filesystem uid, gid and groups: in a child that
// drops to them and asks the kernel (faccessat, AT_EACCESS), so ACLs and
// every directory on the way count. `recreated`: paths the restore writes
// itself (scratch files), checked elsewhere. A path that does not exist is
// left to the restore's own checks.
Status check_user_access(const image::ImageMeta& meta, const std::set<std::string>& recreated);

}  // namespace ckpt::restore
