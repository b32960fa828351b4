#include "util/private_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace ckpt {

namespace {

Status check_stat(const std::string& dir, const struct stat& st) {
  if (!S_ISDIR(st.st_mode)) return make_error(ENOTDIR, dir + " is not a directory");
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return make_error(EPERM, dir + " belongs to uid " + std::to_string(st.st_uid) +
                                 ", not to this user (refusing to write there)");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return make_error(EPERM, dir + " is writable by other users (refusing to write there)");
  return {};
}

}  // namespace

Status check_private_dir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return sys_error(dir);
  return check_stat(dir, st);
}

Status make_private_dirs(const std::string& base, const std::string& path) {
  if (path.compare(0, base.size(), base) != 0 ||
      (path.size() > base.size() && path[base.size()] != '/'))
    return make_error(EINVAL, path + " is not below " + base);
  for (size_t at = base.size() + 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    const std::string p = path.substr(0, at);
    if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) return sys_error("creating " + p);
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return sys_error(p);
    if (S_ISLNK(st.st_mode))
      return make_error(EPERM, p + " is a symbolic link (refusing to write there)");
    CKPT_TRY(check_stat(p, st));
  }
  return {};
}

}  // namespace ckpt
