#include "restore/image_trust.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/format.hpp"
#include "image/job_image.hpp"
#include "ipc/sysv_shm.hpp"
#include "restore/scratch.hpp"
#include "restore/user_access.hpp"

namespace ckpt::restore {

namespace {

#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

Status examine(const std::string& path, bool is_dir_above, ImageWriters* w) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return sys_error(path);
  if (S_ISLNK(st.st_mode)) {  // who placed the link, then what it points to
    if (st.st_uid != 0) {
      w->users.insert(st.st_uid);
      w->owner_groups.insert(st.st_gid);
    }
    if (::stat(path.c_str(), &st) != 0) return sys_error(path);
  }
  if (st.st_uid != 0) {
    w->users.insert(st.st_uid);
    w->owner_groups.insert(st.st_gid);
  }
  // A sticky directory (/tmp) lets nobody but an entry's owner replace it.
  const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
  if ((st.st_mode & S_IWOTH) && !sticky_dir) w->loose.push_back(path + " is writable by everybody");
  if ((st.st_mode & S_IWGRP) && st.st_gid != 0 && !sticky_dir)
    w->loose.push_back(path + " is writable by group " + std::to_string(st.st_gid));
  (void)is_dir_above;
  return {};
}

std::set<gid_t> groups_of(uid_t uid, const std::set<gid_t>& fallback) {
  passwd pw{}, *res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &res) != 0 || !res) return fallback;
  std::vector<gid_t> g(256);
  int n = int(g.size());
  if (::getgrouplist(pw.pw_name, pw.pw_gid, g.data(), &n) < 0) {
    g.resize(size_t(n));
    if (::getgrouplist(pw.pw_name, pw.pw_gid, g.data(), &n) < 0) return fallback;
  }
  return std::set<gid_t>(g.begin(), g.begin() + n);
}

std::string ids(const std::array<uint32_t, 4>& a) {
  return std::to_string(a[0]) + "/" + std::to_string(a[1]) + "/" + std::to_string(a[2]) + "/" +
         std::to_string(a[3]);
}

}  // namespace

Result<ImageWriters> image_writers(const std::string& dir, const image::Chain& chain) {
  ImageWriters w;
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real)) return sys_error(dir);
  CKPT_TRY(examine(dir, false, &w));
  for (std::string up = real; up != "/";) {
    up = up.substr(0, up.rfind('/'));
    if (up.empty()) up = "/";
    CKPT_TRY(examine(up, true, &w));
  }
  for (const auto& link : chain.links) {
    // A job member's images are in member-PID/ inside the generation directory.
    const bool member = link->path().find("/member-") != std::string::npos;
    const std::string gen = member ? link->path().substr(0, link->path().rfind('/')) : link->path();
    if (member) CKPT_TRY(examine(gen, false, &w));
    struct stat st;
    if (::lstat((gen + "/" + image::kJobFile).c_str(), &st) == 0)
      CKPT_TRY(examine(gen + "/" + image::kJobFile, false, &w));
    CKPT_TRY(examine(link->path(), false, &w));
    for (const char* f : {image::kMetaFile, image::kAddrFile, image::kPagesFile})
      CKPT_TRY(examine(link->path() + "/" + f, false, &w));
  }
  return w;
}

Status fits_user(const image::ImageMeta& meta, uid_t uid, const std::set<gid_t>& allowed) {
  const std::string user = "uid " + std::to_string(uid);
  for (const image::TaskCredentials& c : meta.credentials) {
    const std::string t = "thread " + std::to_string(c.tid);
    for (uint32_t u : c.uid)
      if (u != uid)
        return make_error(
            EPERM, t + " claims uids " + ids(c.uid) + " but " + user + " could write the images");
    for (uint32_t g : c.gid)
      if (!allowed.count(g))
        return make_error(EPERM, t + " claims gid " + std::to_string(g) + ", not a group of " +
                                     user + " who could write the images");
    for (uint32_t g : c.groups)
      if (!allowed.count(g))
        return make_error(EPERM, t + " claims supplementary group " + std::to_string(g) +
                                     ", not a group of " + user + " who could write the images");
    if (c.cap_permitted | c.cap_effective | c.cap_inheritable | c.cap_ambient)
      return make_error(EPERM, t + " claims capabilities but " + user + " could write the images");
    const int policy = c.sched_policy & ~SCHED_RESET_ON_FORK;
    if (policy == 1 || policy == 2)
      return make_error(EPERM,
                        t + " claims real-time scheduling but " + user + " could write the images");
    if (c.nice < 0)
      return make_error(EPERM, t + " claims nice " + std::to_string(c.nice) + " but " + user +
                                   " could write the images");
  }
  // Objects the restore makes with a saved owner: SysV segments and shared
  // files deleted since (the owner is packed in the mapping record).
  for (const image::VmaRecord& v : meta.vmas) {
    if (v.flags & image::kVmaSysv) {
      const ipc::SysvSegment seg = ipc::sysv_of(v);
      if (seg.uid != uid || !allowed.count(seg.gid))
        return make_error(EPERM, "SysV segment " + std::to_string(seg.id) + " claims owner " +
                                     std::to_string(seg.uid) + ":" + std::to_string(seg.gid) +
                                     " but " + user + " could write the images");
    } else if ((v.flags & image::kVmaDelShared) && uint32_t(uint64_t(v.mtime_ns) >> 32) != uid) {
      return make_error(EPERM, "deleted file " + v.name + " claims owner " +
                                   std::to_string(uint64_t(v.mtime_ns) >> 32) + " but " + user +
                                   " could write the images");
    }
  }
  // Nothing is made for a temporary directory that exists (/tmp), a file
  // too large to save (reopened by path like any other), or a directory
  // that is there with the owner claimed (the job's own under a root-owned
  // one): the restore leaves those as they are.
  for (const image::ScratchFile& f : meta.scratch) {
    if (f.flags & (image::kScratchBase | image::kScratchNotSaved)) continue;
    struct stat st;
    if (f.type == S_IFDIR && ::lstat(f.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == f.uid)
      continue;
    if (f.uid != uid || !allowed.count(f.gid))
      return make_error(EPERM, "scratch file " + f.path + " claims owner " + std::to_string(f.uid) +
                                   ":" + std::to_string(f.gid) + " but " + user +
                                   " could write the images");
  }
  if (meta.state.has_rlimits) {
    for (int r = 0; r < 16; ++r) {
      rlimit64 own;
      if (::prlimit64(0, __rlimit_resource(r), nullptr, &own) != 0) continue;
      uint64_t hard = meta.state.rlimits[size_t(2 * r + 1)];
      if (own.rlim_max != RLIM64_INFINITY && (hard == RLIM64_INFINITY || hard > own.rlim_max))
        return make_error(EPERM, "resource limit " + std::to_string(r) +
                                     " above the restorer's hard limit, but " + user +
                                     " could write the images");
    }
  }
  return {};
}

Status check_image_trust(const std::string& dir, const image::Chain& chain) {
  const image::ImageMeta& meta = chain.newest();
  if (::geteuid() != 0) {
    // The kernel allows no credential change anyway; say so before starting.
    const uid_t me = ::getuid();
    for (const image::TaskCredentials& c : meta.credentials)
      for (uint32_t u : c.uid)
        if (u != me && u != ::geteuid())
          return make_error(EPERM, "the checkpointed process ran as uid " + std::to_string(u) +
                                       ": restoring it needs root (cr_restart runs as uid " +
                                       std::to_string(me) + ")");
    return {};
  }
  CKPT_ASSIGN(ImageWriters w, image_writers(dir, chain));
  if (!w.loose.empty())
    return make_error(EPERM, "refusing to restore as root: " + w.loose.front() +
                                 " (the images must be writable only by their owner)");
  if (w.users.empty()) return {};  // only root could write them
  if (w.users.size() > 1) {
    auto it = w.users.begin();
    uid_t a = *it++;
    return make_error(EPERM, "refusing to restore as root: images in " + dir +
                                 " are writable by uids " + std::to_string(a) + " and " +
                                 std::to_string(*it));
  }
  const uid_t user = *w.users.begin();
  if (meta.credentials.empty())
    return make_error(EPERM, "refusing to restore as root: the images in " + dir +
                                 " are writable by uid " + std::to_string(user) +
                                 " and record no credentials (written before they were saved)");
  Status st = fits_user(meta, user, groups_of(user, w.owner_groups));
  if (st.ok()) st = check_user_access(meta, scratch_paths(meta));
  if (!st.ok()) return st.error().context("refusing to restore as root");
  return {};
}

}  // namespace ckpt::restore
