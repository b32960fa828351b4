// Directories the tools create or write into: nobody but the caller (or
// root) may own them or write into them, so no other user can plant a file
// or a symbolic link where a tool is about to create one.
#pragma once

#include <ckpt/result.hpp>
#include <string>

namespace ckpt {

// `dir` (a path the user gave: a symbolic link to it is followed) is owned by
// the caller's effective uid or by root, and neither group nor others may
// write into it. Otherwise an EPERM error saying which.
Status check_private_dir(const std::string& dir);

// Creates the missing directories of `path` below `base` (mode 0700) and
// checks every one of them below `base`, without following symbolic links,
// as check_private_dir does. `base` itself (/run, /tmp...) is not checked.
Status make_private_dirs(const std::string& base, const std::string& path);

}  // namespace ckpt
