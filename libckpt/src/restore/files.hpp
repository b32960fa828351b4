// File descriptors of the restored process: checked and opened (or created)
// here in the restorer before the process exists, then moved into place by
// the new process itself (spawn's child) before it stops.
#pragma once

#include <ckpt/result.hpp>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "image/model.hpp"
#include "sockets/tcp.hpp"
#include "sockets/udp.hpp"
#include "sockets/unix.hpp"
#include "tty/pty.hpp"
#include "util/fd.hpp"

namespace ckpt::restore {

struct PreparedFile {
  int target;    // fd number in the restored process
  int source;    // fd in this process holding the open file (-1: inherit our own `target`)
  int fd_flags;  // FD_CLOEXEC
};

// An epoll registration, made in the new process once every fd has its
// number (the kernel keys registrations by fd number).
struct EpollAdd {
  int epfd;  // target numbers
  int tfd;
  uint32_t events;
  uint64_t data;
};

struct PreparedFiles {
  std::vector<PreparedFile> fds;
  std::vector<EpollAdd> epoll;
  std::vector<int> async;       // target fds whose open file had O_ASYNC
  std::vector<UniqueFd> owned;  // this process's copies, closed once the child has its own
};

// What the members of a job share, across their prepare_files calls: one
// pipe per checkpointed pipe, one inode per deleted file, and the open file
// descriptions several members hold (job.img's shares).
struct SharedFiles {
  struct PipeEnds {
    int r, w;
    bool r_used = false, w_used = false;
  };
  std::map<uint64_t, PipeEnds> pipes;                           // by the checkpointed inode
  std::map<std::pair<uint64_t, uint64_t>, int> deleted;         // (dev, ino) -> recreated
  std::map<std::string, int> fifos;                             // path -> a read-write handle
  std::set<std::string> refilled;                               // pipes and FIFOs refilled
  std::map<std::pair<int, int>, int> sources;                   // (pid, fd) -> fd here
  std::map<std::pair<int, int>, std::pair<int, int>> share_of;  // (pid, fd) -> (pid, fd)
  std::set<std::tuple<int, int, int>> epoll_made;  // (epoll, file, fd number): registered once
  std::vector<sockets::Repaired> repaired;         // TCP connections still in repair mode
  // Connections to peers outside the job stay in repair mode (held) until
  // the caller says both sides exist (a job across nodes).
  bool hold_outside = false;
  std::vector<sockets::Held> held;
  sockets::UnixJob unix_sockets;  // UNIX sockets: queues refilled at the end
  sockets::UdpJob udp_sockets;    // UDP sockets: queues refilled, then connected
  tty::Pairs ptys;
  std::vector<UniqueFd> owned;  // this process's copies, kept until every member has its own
  const LogFn* log = nullptr;   // the caller's (RestoreOptions::log): waits worth telling
};

// Ends what prepare_files had to leave half done until every file of the
// job existed: TCP connections leave repair mode, UNIX sockets get their
// queues and shutdowns.
Status finish_files(SharedFiles* shared);

// Refuses a restore when a file the image refers to by path (an fd or a
// file mapping) changed on disk since the checkpoint, unless `force`. One
// line naming the fd or mapping, the path and what changed.
Status check_files_unchanged(const image::ImageMeta& meta, bool force);

// Opens or creates every file of the image here, before any process exists,
// so a missing file fails the restore cleanly: regular files reopened at
// their offset, deleted files recreated (and unlinked), pipes created and
// refilled with their unread data, FIFOs reopened, eventfd/timerfd/signalfd/
// epoll instances created with their state.
Status prepare_files(const image::ImageMeta& meta, PreparedFiles* out);
// The same for one member of a job: what members share comes from and goes
// to `shared`, which keeps the files open (members are prepared in job order).
Status prepare_files(const image::ImageMeta& meta, PreparedFiles* out, SharedFiles* shared);

// In the new process (spawn's child): moves every prepared file to its
// number, registers the epoll interest lists, closes everything else except
// *keep_fd, which is moved above every target number first (it may sit on
// one) and updated. On failure returns false with *err set (the child then
// reports it through *keep_fd and exits).
bool install_files(PreparedFiles& files, int* keep_fd, std::string* err);

}  // namespace ckpt::restore
