#include "restore/file_locks.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <cstring>

#include "proc/fd_links.hpp"
#include "proc/file_locks.hpp"

namespace ckpt::restore {

using image::LockKind;

std::string describe_lock(const image::FileLock& l) {
  const char* kind = l.kind == LockKind::kFlock   ? "flock"
                     : l.kind == LockKind::kPosix ? "POSIX"
                                                  : "OFD";
  std::string out = std::string(kind) + (l.type == F_RDLCK ? " read lock" : " write lock");
  if (l.kind == LockKind::kFlock) return out;
  return out + " on bytes " + std::to_string(l.start) + "-" +
         (l.end == image::kLockToEof ? std::string("EOF") : std::to_string(l.end));
}

std::vector<HeldLock> locks_to_take(const image::ImageMeta& meta, const std::set<int>& shared) {
  std::vector<HeldLock> out;
  for (const image::FileRecord& f : meta.files)
    for (const image::FileLock& l : f.locks)
      if (l.kind == LockKind::kPosix || !shared.count(f.fd)) out.push_back({f.fd, f.path, l});
  return out;
}

Status take_locks(pid_t pid, AddressSpaceBuilder& b, const std::vector<HeldLock>& locks) {
  for (const HeldLock& h : locks) {
    const image::FileLock& l = h.lock;
    const std::string what = "fd " + std::to_string(h.fd) + ": " + h.path;
    Result<long> r = 0L;
    if (l.type != F_RDLCK && l.type != F_WRLCK)
      return make_error(EBADMSG, what + ": lock of unknown type in image");
    if (l.kind == LockKind::kFlock) {
      r = b.sys("flock", SYS_flock, uint64_t(h.fd),
                uint64_t((l.type == F_RDLCK ? LOCK_SH : LOCK_EX) | LOCK_NB));
    } else if (l.kind == LockKind::kPosix || l.kind == LockKind::kOfd) {
      struct flock fl {};
      fl.l_type = short(l.type);
      fl.l_whence = SEEK_SET;
      fl.l_start = off_t(l.start);
      fl.l_len = l.end == image::kLockToEof ? 0 : off_t(l.end - l.start + 1);
      fl.l_pid = 0;  // F_OFD_SETLK requires it
      CKPT_ASSIGN(uint64_t at, b.put_data(&fl, sizeof fl));
      r = b.sys("fcntl", SYS_fcntl, uint64_t(h.fd),
                uint64_t(l.kind == LockKind::kPosix ? F_SETLK : F_OFD_SETLK), at);
    } else {
      return make_error(EBADMSG, what + ": lock of unknown kind in image");
    }
    if (r.ok()) continue;
    const int err = r.error().code;
    std::string why = std::strerror(err);
    struct stat st;
    if ((err == EAGAIN || err == EACCES) &&
        ::stat(("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(h.fd)).c_str(), &st) == 0)
      if (auto holder = proc::conflicting_lock(st.st_dev, st.st_ino, l))
        why = "held by " + proc::describe_holder(*holder) + " now";
    return make_error(err ? err : EIO,
                      what + ": cannot take its " + describe_lock(l) + " back: " + why);
  }
  return {};
}

Status set_owners(pid_t pid, const image::ImageMeta& meta) {
  for (const image::FileRecord& f : meta.files) {
    if (!f.owner.set() || f.dup_of != -1) continue;
    const std::string what = "fd " + std::to_string(f.fd) + ": " + f.path;
    CKPT_ASSIGN(UniqueFd copy, proc::take_fd(pid, f.fd));
    if (f.owner.signo && ::fcntl(copy.get(), F_SETSIG, int(f.owner.signo)) != 0)
      return sys_error(what + ": F_SETSIG " + std::to_string(f.owner.signo));
    if (!f.owner.pid) continue;
    f_owner_ex o{};
    o.type = static_cast<decltype(o.type)>(f.owner.type);
    o.pid = f.owner.pid;
    if (::fcntl(copy.get(), F_SETOWN_EX, &o) != 0) {
      const char* who = f.owner.type == F_OWNER_TID    ? "thread"
                        : f.owner.type == F_OWNER_PGRP ? "process group"
                                                       : "process";
      return sys_error(what + ": giving its signal-driven I/O back to " + who + " " +
                       std::to_string(f.owner.pid));
    }
  }
  return {};
}

}  // namespace ckpt::restore
