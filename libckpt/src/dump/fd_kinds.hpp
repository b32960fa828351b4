// What each kind of open file holds beyond its path, read from a frozen
// process (/proc/PID/fdinfo, a copy of the descriptor, its peers): the
// pieces collect_files (files.cpp) puts together. Refusals name the fd.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "image/model.hpp"

namespace ckpt::dump::fds {

// What a checkpoint may carry in file content (deleted files, unread pipe
// data): the metadata holds it, and restore reads the metadata into memory.
constexpr uint64_t kMaxDeletedFileBytes = 64ull << 20;
constexpr uint64_t kMaxSavedBytes = 256ull << 20;

// One fd as /proc shows it.
struct RawFd {
  int fd = -1;
  std::string link;  // /proc/PID/fd/N target
  std::string info;  // /proc/PID/fdinfo/N
  struct stat st {};
};

// The value after "KEY" at the start of a line of an fdinfo text (nullptr if absent).
const char* field(const std::string& info, const char* key);
// kcmp(2) of two of `pid`'s own descriptors.
long kcmp_self(pid_t pid, int type, unsigned long a, unsigned long b);

// Socket inode `ino` as the target's /proc/PID/net tables name it, for a
// refusal ("UNIX socket /run/x.sock", "TCP 127.0.0.1:80 LISTEN"...).
std::string describe_socket(pid_t pid, uint64_t ino);

// The unread bytes of the pipe or FIFO behind `link_path` (/proc/PID/fd/N),
// without consuming them, and its capacity.
Status peek_pipe(const std::string& link_path, const std::string& what, image::FileRecord* f);

// Processes outside `job` (and other than `pid` and the tool) that hold one
// of `links` (pipes by "pipe:[ino]", FIFOs and pty slaves by path): link ->
// "PID N (comm)" of the first found.
std::map<std::string, std::string> other_holders(pid_t pid, const std::vector<std::string>& links,
                                                 const std::vector<pid_t>& job);

// Anonymous-inode files: an eventfd's counter and mode, a timerfd's clock,
// setting and ticks, a signalfd's mask, an epoll's interest list (whose
// files must still sit at the fd numbers the program registered, in `pid`
// or another of `members` holding the same epoll).
Status collect_eventfd(const RawFd& r, const std::string& what, image::FileRecord* f);
Status collect_timerfd(const RawFd& r, const std::string& what, image::FileRecord* f);
Status collect_signalfd(const RawFd& r, const std::string& what, image::FileRecord* f);
Status collect_epoll(pid_t pid, const RawFd& r, const std::string& what, image::FileRecord* f,
                     const std::vector<pid_t>& members);

// The locks held through this open file (flock, OFD, and this process's
// POSIX locks); a line that cannot be read refuses rather than drop a lock.
Status collect_locks(const RawFd& r, const std::string& what, image::FileRecord* f);
// Signal-driven I/O's owner and signal, read on `copy` (a copy of the fd).
Status collect_owner(int copy, const std::string& what, image::FileRecord* f);
// A deleted file's content (at most kMaxDeletedFileBytes), through the
// process's own link to it, with its mode and owner (and a memfd's seals).
Status collect_deleted(const std::string& link_path, const RawFd& r, const std::string& what,
                       image::FileRecord* f);

}  // namespace ckpt::dump::fds
