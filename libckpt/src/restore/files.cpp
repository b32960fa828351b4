// Restore side of the file descriptors (docs/state.md, "Files and descriptors").
#include "restore/files.hpp"
#include "restore/fd_shuffle.hpp"
#include "restore/scratch.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>

#include "notify/inotify.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

#ifndef TFD_IOC_SET_TICKS  // linux/timerfd.h, which clashes with glibc's sys/timerfd.h
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif

namespace ckpt::restore {

using image::FileKind;
using image::FileRecord;

namespace {

std::string fd_name(int fd) {
  return "fd " + std::to_string(fd);
}

std::string self_fd(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

// Flags for reopening: creation flags dropped, close-on-exec until the child
// sets the real fd flags. O_ASYNC too: open(2) would only set the flag, and
// F_SETFL, which registers the fd for signals, then sees nothing to change;
// the child sets it through its own fd number (install_files).
int reopen_flags(uint32_t flags) {
  return (int(flags) & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY | O_ASYNC)) | O_CLOEXEC;
}

Status set_nonblock(int fd, bool on, const std::string& what) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) != 0)
    return sys_error(what);
  return {};
}

// A new pipe gets the capacity the checkpointed one had.
Status size_pipe(int fd, const FileRecord& f, const std::string& what) {
  const uint64_t cap = f.params.size() > image::kPipeCapacity ? f.params[image::kPipeCapacity] : 0;
  if (cap && ::fcntl(fd, F_SETPIPE_SZ, int(cap)) < 0)
    return sys_error(what + ": setting the pipe size to " + std::to_string(cap));
  return {};
}

// The unread bytes a record carries (the checkpoint puts them on the first
// record of a pipe; any record's are taken).
Status refill_pipe(int wfd, const FileRecord& f, const std::string& what) {
  if (f.data.empty()) return {};
  CKPT_TRY(set_nonblock(wfd, true, what));
  CKPT_TRY(write_all(wfd, f.data.data(), f.data.size(), "the unread data of " + what));
  return set_nonblock(wfd, false, what);
}

// A deleted file's inode again: created under its old name and unlinked at
// once (so /proc shows "NAME (deleted)" as before), or, when the name is
// taken meanwhile, an unnamed O_TMPFILE in the same directory. A memfd is a
// new memfd of the same name, with its seals.
Result<UniqueFd> recreate_deleted(const FileRecord& f, const std::string& what) {
  const bool memfd = f.kind == FileKind::kMemfd;
  UniqueFd fd;
  if (memfd) {
    // The name after "/memfd:" (the kernel adds the prefix again).
    fd.reset(::memfd_create(f.path.c_str() + 7, MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!fd.valid()) return sys_error("recreating " + what);
  } else {
    fd.reset(::open(f.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.valid()) {
      if (::unlink(f.path.c_str()) != 0) return sys_error("recreating " + what + ": unlink");
    } else {
      if (errno != EEXIST) return sys_error("recreating deleted " + what);
      std::string dir = f.path.substr(0, f.path.rfind('/'));
      fd.reset(::open(dir.empty() ? "/" : dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
      if (!fd.valid()) return sys_error("recreating deleted " + what + " in " + dir);
    }
  }
  CKPT_TRY(write_all(fd.get(), f.data.data(), f.data.size(), "deleted " + what));
  if (f.params.size() >= image::kDeletedParams) {
    if (::fchown(fd.get(), uid_t(f.params[image::kDeletedUid]),
                 gid_t(f.params[image::kDeletedGid])) != 0 ||
        ::fchmod(fd.get(), mode_t(f.params[image::kDeletedMode])) != 0)
      return sys_error("recreating " + what + ": owner and mode");
  }
  if (memfd && f.params.size() >= image::kMemfdParams) {
    // Seals last: F_SEAL_WRITE and the like would stop the content above.
    if (::fcntl(fd.get(), F_ADD_SEALS, int(f.params[image::kMemfdSeals])) != 0)
      return sys_error("recreating " + what + ": seals");
  }
  return fd;
}

Result<UniqueFd> make_timerfd(const FileRecord& f, const std::string& what) {
  if (f.params.size() < image::kTimerfdParams)
    return make_error(EBADMSG, what + ": timerfd record is malformed");
  const int clk = int(f.params[image::kTimerfdClock]);
  const uint64_t set_flags = f.params[image::kTimerfdSetFlags];
  UniqueFd fd(::timerfd_create(clk, TFD_CLOEXEC | ((f.flags & O_NONBLOCK) ? TFD_NONBLOCK : 0)));
  if (!fd.valid()) return sys_error("creating " + what);
  auto ts = [](uint64_t ns) { return timespec{time_t(ns / 1000000000), long(ns % 1000000000)}; };
  itimerspec its{};
  its.it_interval = ts(f.params[image::kTimerfdIntervalNs]);
  int flags = 0;
  uint64_t left = f.params[image::kTimerfdValueNs];
  // A periodic timer that expired and was not read yet shows no time left:
  // the kernel moves it on at the next read. Its next expiry is then one
  // interval away (its unread expirations are restored as ticks below).
  if (!left) left = f.params[image::kTimerfdIntervalNs];
  if (left) {
    const bool wall = clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_ALARM || clk == CLOCK_TAI;
    if ((set_flags & TFD_TIMER_ABSTIME) && wall && f.params[image::kTimerfdValueNs]) {
      // A wall-clock deadline stays the same deadline (it may be past: the
      // timer then fires at once).
      its.it_value = ts(f.params[image::kTimerfdDeadlineNs]);
      flags = int(set_flags & (TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET));
    } else {
      // Relative timers, and deadlines on clocks that restart with each boot:
      // the time that was left when the checkpoint was taken.
      its.it_value = ts(left);
    }
    if (::timerfd_settime(fd.get(), flags, &its, nullptr) != 0) return sys_error("arming " + what);
  }
  if (uint64_t ticks = f.params[image::kTimerfdTicks]) {
    if (::ioctl(fd.get(), TFD_IOC_SET_TICKS, &ticks) != 0)
      return sys_error(what + ": restoring " + std::to_string(ticks) + " unread expirations");
  }
  return fd;
}

// The interest list of an epoll record, registered in the new process once
// its fds have their numbers.
Status add_epoll(const FileRecord& f, const std::string& what, PreparedFiles* out) {
  if (f.params.size() % 3 != 0) return make_error(EBADMSG, what + ": epoll record is malformed");
  for (size_t i = 0; i < f.params.size(); i += 3)
    out->epoll.push_back({f.fd, int(f.params[i]), uint32_t(f.params[i + 1]), f.params[i + 2]});
  return {};
}

}  // namespace

Status prepare_files(const image::ImageMeta& meta, PreparedFiles* out) {
  SharedFiles shared;
  Status s = prepare_files(meta, out, &shared);
  if (s.ok()) s = finish_files(&shared);
  for (auto& fd : shared.owned) out->owned.push_back(std::move(fd));
  return s;
}

namespace {

// One member's files prepared here: each record's source, a descriptor of
// the restorer holding its file (made, reopened, or shared with an earlier
// record or member), kept open in `shared` until every member has its own.
class FilePreparer {
 public:
  FilePreparer(const image::ImageMeta& meta, PreparedFiles* out, SharedFiles* shared)
      : meta_(meta), out_(out), shared_(shared), pid_(meta.process.pid) {}
  Status run();

 private:
  // The source of `f` made afresh for its kind.
  Result<int> make(const FileRecord& f, const std::string& what);
  Result<int> reopen_path(const FileRecord& f, const std::string& what);
  Result<int> deleted_file(const FileRecord& f, const std::string& what);
  Result<int> pipe_end(const FileRecord& f, const std::string& what);
  Result<int> fifo(const FileRecord& f, const std::string& what);
  Result<int> eventfd(const FileRecord& f, const std::string& what);
  Result<int> signalfd(const FileRecord& f, const std::string& what);
  // Another open file description of the file at `base` (fd here).
  Result<int> reopen(int base, uint32_t flags, const std::string& what);
  // Unread data is in the image once per member holding the pipe; the pipe
  // of a job is one, filled once.
  Status refill_once(int wfd, const FileRecord& f, const std::string& key, const std::string& what);
  int keep(UniqueFd fd);
  // Every epoll registration names a file of the image; one made by
  // several members (the same epoll, file and fd number) is made once.
  Status check_epoll();

  const image::ImageMeta& meta_;
  PreparedFiles* out_;
  SharedFiles* shared_;
  const int pid_;
  std::map<int, int> source_of_;  // target fd -> fd here holding its file
  std::vector<int> targets_;
};

Status FilePreparer::run() {
  for (const FileRecord& f : meta_.files) {
    const std::string what = fd_name(f.fd) + ": " + f.path;
    int source = -1;
    auto share = shared_->share_of.find({pid_, f.fd});
    if (share != shared_->share_of.end()) {
      // The same open file description as an earlier member's fd.
      auto it = shared_->sources.find(share->second);
      if (it == shared_->sources.end())
        return make_error(EBADMSG, what + ": shares the file of fd " +
                                       std::to_string(share->second.second) + " of PID " +
                                       std::to_string(share->second.first) +
                                       ", which is not in the image before it");
      source = it->second;
      // An epoll shared by members: each registers what it had registered
      // through its own fd numbers (deduplicated by check_epoll).
      if (f.kind == FileKind::kEpoll) CKPT_TRY(add_epoll(f, what, out_));
    } else if (f.dup_of != -1) {
      auto it = source_of_.find(f.dup_of);
      if (it == source_of_.end())
        return make_error(EBADMSG, what + ": shares the file of fd " + std::to_string(f.dup_of) +
                                       ", which is not in the image before it");
      source = it->second;
    } else if (f.kind == FileKind::kInheritStdio) {
      if (::fcntl(f.fd, F_GETFD) < 0)
        return make_error(EBADF, what + ": the restoring process has no fd " +
                                     std::to_string(f.fd) + " to connect it to");
      out_->fds.push_back({f.fd, -1, int(f.fd_flags)});
      source_of_[f.fd] = f.fd;
      targets_.push_back(f.fd);
      continue;
    } else {
      CKPT_ASSIGN(source, make(f, what));
    }
    out_->fds.push_back({f.fd, source, int(f.fd_flags)});
    // One registration per open file description, by its first holder.
    if ((f.flags & O_ASYNC) && f.dup_of == -1 && share == shared_->share_of.end())
      out_->async.push_back(f.fd);
    source_of_[f.fd] = source;
    shared_->sources[{pid_, f.fd}] = source;
    targets_.push_back(f.fd);
  }
  return check_epoll();
}

Result<int> FilePreparer::make(const FileRecord& f, const std::string& what) {
  switch (f.kind) {
    case FileKind::kRegular:
    case FileKind::kCharDevice:
      return reopen_path(f, what);
    case FileKind::kDeleted:
    case FileKind::kMemfd:
      return deleted_file(f, what);
    case FileKind::kPipe:
      return pipe_end(f, what);
    case FileKind::kFifo:
      return fifo(f, what);
    case FileKind::kEventfd:
      return eventfd(f, what);
    case FileKind::kTimerfd: {
      CKPT_ASSIGN(UniqueFd fd, make_timerfd(f, what));
      return keep(std::move(fd));
    }
    case FileKind::kSignalfd:
      return signalfd(f, what);
    case FileKind::kEpoll: {
      CKPT_TRY(add_epoll(f, what, out_));
      UniqueFd fd(::epoll_create1(EPOLL_CLOEXEC));
      if (!fd.valid()) return sys_error("creating " + what);
      return keep(std::move(fd));
    }
    case FileKind::kTcp: {
      CKPT_ASSIGN(UniqueFd fd, sockets::restore_tcp(f, what, &shared_->repaired, shared_->log));
      return keep(std::move(fd));
    }
    case FileKind::kUdp: {
      CKPT_ASSIGN(UniqueFd fd, sockets::restore_udp(f, what, &shared_->udp_sockets));
      return keep(std::move(fd));
    }
    case FileKind::kUnix: {
      CKPT_ASSIGN(UniqueFd fd, sockets::restore_unix(f, what, &shared_->unix_sockets));
      return keep(std::move(fd));
    }
    case FileKind::kInotify: {
      CKPT_ASSIGN(UniqueFd fd, notify::restore_inotify(f, what));
      return keep(std::move(fd));
    }
    case FileKind::kPtyMaster:
    case FileKind::kPtyMasterQueued:
    case FileKind::kPtySlave: {
      CKPT_ASSIGN(UniqueFd fd, tty::restore_pty(f, what, &shared_->ptys));
      return keep(std::move(fd));
    }
    default:
      return make_error(ENOTSUP, what + ": unknown file kind in image");
  }
}

Result<int> FilePreparer::reopen_path(const FileRecord& f, const std::string& what) {
  UniqueFd fd(::open(f.path.c_str(), reopen_flags(f.flags)));
  if (!fd.valid()) return sys_error("reopening " + what);
  if (f.kind == FileKind::kRegular && !(f.flags & O_PATH) &&
      ::lseek(fd.get(), off_t(f.offset), SEEK_SET) != off_t(f.offset) && errno != ESPIPE)
    return sys_error("seeking " + what);
  return keep(std::move(fd));
}

// A deleted file (or memfd) made again once per job, from the record that
// carries its content (the first, as the checkpoint writes it), then an
// open file description of it for each record.
Result<int> FilePreparer::deleted_file(const FileRecord& f, const std::string& what) {
  auto key = std::make_pair(f.dev, f.ino);
  auto it = shared_->deleted.find(key);
  if (it == shared_->deleted.end()) {
    const FileRecord* full = &f;
    for (const FileRecord& o : meta_.files)
      if (o.kind == f.kind && o.dev == f.dev && o.ino == f.ino && !o.data.empty()) full = &o;
    CKPT_ASSIGN(UniqueFd base, recreate_deleted(*full, what));
    it = shared_->deleted.emplace(key, keep(std::move(base))).first;
  }
  CKPT_ASSIGN(int source, reopen(it->second, f.flags, what + " (deleted)"));
  if (::lseek(source, off_t(f.offset), SEEK_SET) != off_t(f.offset))
    return sys_error("seeking " + what);
  return source;
}

// A pipe made once per job; each end handed to its first holder, another
// open file description of the same end (opened again through /proc) made
// anew, as it was.
Result<int> FilePreparer::pipe_end(const FileRecord& f, const std::string& what) {
  auto& pipes = shared_->pipes;
  auto it = pipes.find(f.ino);
  if (it == pipes.end()) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return sys_error("creating " + what);
    SharedFiles::PipeEnds ends{keep(UniqueFd(p[0])), keep(UniqueFd(p[1]))};
    CKPT_TRY(size_pipe(ends.w, f, what));
    it = pipes.emplace(f.ino, ends).first;
  }
  CKPT_TRY(refill_once(it->second.w, f, "pipe:" + std::to_string(f.ino), what));
  const bool reader = (f.flags & O_ACCMODE) == O_RDONLY;
  int& end = reader ? it->second.r : it->second.w;
  bool& used = reader ? it->second.r_used : it->second.w_used;
  int source;
  if (used) {
    CKPT_ASSIGN(source, reopen(end, f.flags & ~uint32_t(O_NONBLOCK), what));
  } else {
    source = end;
    used = true;
  }
  CKPT_TRY(set_nonblock(source, f.flags & O_NONBLOCK, what));
  return source;
}

// A FIFO reopened by path. A read-write handle, made once per job, keeps its
// buffer alive and lets write-only opens succeed without blocking.
Result<int> FilePreparer::fifo(const FileRecord& f, const std::string& what) {
  auto& fifos = shared_->fifos;
  auto it = fifos.find(f.path);
  if (it == fifos.end()) {
    UniqueFd rw(::open(f.path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    struct stat st;
    if (!rw.valid()) return sys_error("reopening FIFO " + what);
    if (::fstat(rw.get(), &st) != 0 || !S_ISFIFO(st.st_mode))
      return make_error(ESTALE, what + ": no longer a FIFO");
    CKPT_TRY(size_pipe(rw.get(), f, what));
    it = fifos.emplace(f.path, keep(std::move(rw))).first;
  }
  CKPT_TRY(refill_once(it->second, f, "fifo:" + f.path, what));
  UniqueFd fd(::open(f.path.c_str(), reopen_flags(f.flags) | O_NONBLOCK));
  if (!fd.valid()) return sys_error("reopening FIFO " + what);
  CKPT_TRY(set_nonblock(fd.get(), f.flags & O_NONBLOCK, what));
  return keep(std::move(fd));
}

Result<int> FilePreparer::eventfd(const FileRecord& f, const std::string& what) {
  if (f.params.size() < image::kEventfdParams)
    return make_error(EBADMSG, what + ": eventfd record is malformed");
  const uint64_t count = f.params[image::kEventfdCount];
  int flags = EFD_CLOEXEC | (f.params[image::kEventfdSemaphore] ? EFD_SEMAPHORE : 0) |
              ((f.flags & O_NONBLOCK) ? EFD_NONBLOCK : 0);
  UniqueFd fd(::eventfd(count <= UINT_MAX ? unsigned(count) : 0, flags));
  if (!fd.valid()) return sys_error("creating " + what);
  if (count > UINT_MAX && ::write(fd.get(), &count, 8) != 8)
    return sys_error("setting the counter of " + what);
  return keep(std::move(fd));
}

Result<int> FilePreparer::signalfd(const FileRecord& f, const std::string& what) {
  if (f.params.size() < image::kSignalfdParams)
    return make_error(EBADMSG, what + ": signalfd record is malformed");
  uint64_t mask = f.params[image::kSignalfdMask];
  int flags = O_CLOEXEC | int(f.flags & O_NONBLOCK);
  UniqueFd fd(int(::syscall(SYS_signalfd4, -1, &mask, sizeof mask, flags)));
  if (!fd.valid()) return sys_error("creating " + what);
  return keep(std::move(fd));
}

Result<int> FilePreparer::reopen(int base, uint32_t flags, const std::string& what) {
  // Through /proc/self/fd, a symlink: O_NOFOLLOW would refuse it.
  UniqueFd fd(::open(self_fd(base).c_str(), reopen_flags(flags) & ~O_NOFOLLOW));
  if (!fd.valid()) return sys_error("reopening " + what);
  return keep(std::move(fd));
}

Status FilePreparer::refill_once(int wfd, const FileRecord& f, const std::string& key,
                                 const std::string& what) {
  if (f.data.empty() || !shared_->refilled.insert(key).second) return {};
  return refill_pipe(wfd, f, what);
}

int FilePreparer::keep(UniqueFd fd) {
  int raw = fd.get();
  shared_->owned.push_back(std::move(fd));
  return raw;
}

Status FilePreparer::check_epoll() {
  for (const EpollAdd& e : out_->epoll)
    if (std::find(targets_.begin(), targets_.end(), e.tfd) == targets_.end())
      return make_error(EBADMSG, fd_name(e.epfd) + ": epoll watches fd " + std::to_string(e.tfd) +
                                     ", which is not in the image");
  // The kernel keys a registration by (epoll, file, fd number): members
  // holding both at the same numbers list it each; it is made once.
  std::erase_if(out_->epoll, [&](const EpollAdd& e) {
    return !shared_->epoll_made.insert({source_of_[e.epfd], source_of_[e.tfd], e.tfd}).second;
  });
  return {};
}

}  // namespace

Status prepare_files(const image::ImageMeta& meta, PreparedFiles* out, SharedFiles* shared) {
  return FilePreparer(meta, out, shared).run();
}

Status finish_files(SharedFiles* shared) {
  Status s = sockets::finish_unix(&shared->unix_sockets);
  if (s.ok()) s = sockets::finish_udp(&shared->udp_sockets);
  if (s.ok())
    s = sockets::finish_tcp(shared->repaired, shared->hold_outside ? &shared->held : nullptr);
  shared->repaired.clear();
  return s;
}

bool install_files(PreparedFiles& files, int* keep_fd, std::string* err) {
  auto fail = [&](const std::string& what) {
    *err = what + ": " + std::strerror(errno);
    return false;
  };
  if (!place_fds(files.fds, keep_fd, err)) return false;
  std::vector<int> keep;
  for (const auto& f : files.fds) keep.push_back(f.target);
  // Signal-driven I/O, registered under the fd number the signal's si_fd
  // names; its owner is set once every thread exists (set_owners).
  for (int fd : files.async) {
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_ASYNC) != 0)
      return fail("fd " + std::to_string(fd) + ": turning signal-driven I/O (O_ASYNC) back on");
  }
  for (const EpollAdd& e : files.epoll) {
    epoll_event ev{};
    ev.events = e.events;
    ev.data.u64 = e.data;
    if (::epoll_ctl(e.epfd, EPOLL_CTL_ADD, e.tfd, &ev) != 0)
      return fail("fd " + std::to_string(e.epfd) + ": registering fd " + std::to_string(e.tfd) +
                  " in the epoll set");
  }
  keep.push_back(*keep_fd);
  close_all_except(std::move(keep));
  return true;
}

}  // namespace ckpt::restore
