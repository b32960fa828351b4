// What an open file carries beyond the file itself, given back once the
// process exists: its locks (flock, POSIX record locks, OFD locks) and the
// owner of its signal-driven I/O (docs/state.md, "File locks" and
// "Signal-driven I/O").
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <set>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "restore/address_space.hpp"

namespace ckpt::restore {

struct HeldLock {
  int fd;
  std::string path;
  image::FileLock lock;
};

// The locks `meta`'s process takes back itself: all its POSIX locks (they
// belong to the process), and the flock and OFD locks (they belong to the
// open file description) of its fds except `shared`: the fds whose open file
// an earlier member of the job holds too and takes them for.
std::vector<HeldLock> locks_to_take(const image::ImageMeta& meta, const std::set<int>& shared);

// Takes them by calls injected into the stopped process, through its own fd
// numbers, so each lock has the owner it had. After the address space is
// built: building it opens and closes the mapped files, and any close of a
// file drops the process's POSIX locks on it. A lock held by someone else
// now fails naming the holder.
Status take_locks(pid_t pid, AddressSpaceBuilder& b, const std::vector<HeldLock>& locks);

// F_SETOWN_EX and F_SETSIG of every fd that had them, on copies of the
// process's fds (pidfd_getfd: the open file description is the same). After
// every thread of the job exists, since the owner may be any of them.
Status set_owners(pid_t pid, const image::ImageMeta& meta);

// "POSIX write lock on bytes 0-99", "flock read lock".
std::string describe_lock(const image::FileLock& l);

}  // namespace ckpt::restore
