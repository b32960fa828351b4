// The open file descriptors of a frozen process (collect_files, declared in
// dump/collect.hpp): listed from /proc, each classified and read by kind
// (fd_kinds.hpp), then checked against what holds them outside the job.
// What is saved and what is refused: docs/state.md.
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dump/collect.hpp"
#include "dump/fd_kinds.hpp"
#include "dump/unsupported.hpp"
#include "notify/inotify.hpp"
#include "proc/fd_links.hpp"
#include "sockets/tcp.hpp"
#include "sockets/udp.hpp"
#include "sockets/unix.hpp"
#include "tty/pty.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::dump {

using image::FileKind;
using image::FileRecord;
using namespace fds;

namespace {

// One process's descriptors, collected in fd order into `out`. What the
// kinds need of the job (its sockets, its pty masters, the other members'
// descriptors) is read once, at its first use.
class FdCollector {
 public:
  FdCollector(pid_t pid, const std::vector<pid_t>& job, bool tcp_outside,
              std::vector<FileRecord>* out)
      : pid_(pid),
        job_(job),
        members_(job.empty() ? std::vector<pid_t>{pid} : job),
        tcp_outside_(tcp_outside),
        fd_dir_(proc_path(pid, "fd")),
        out_(out) {}

  Status list(int tracker_fd);
  Status collect_all();
  Status check_shared_links() const;

 private:
  Status collect(size_t i);
  // A pipe or terminal on fds 0-2 that is not the job's own: it stays
  // connected to the restorer's.
  bool inherited_stdio(const RawFd& r, const FileRecord& f);
  // The fd of an earlier record with the same open file description (dup,
  // dup2, fork inheritance), or -1.
  int dup_of(size_t i) const;
  Status collect_by_kind(const RawFd& r, const std::string& what, FileRecord* f);
  Status collect_regular(const RawFd& r, const std::string& what, FileRecord* f);
  Status collect_fifo(const RawFd& r, const std::string& what, FileRecord* f);
  Status collect_socket(const RawFd& r, const std::string& what, FileRecord* f);
  Status collect_ptmx(const RawFd& r, const std::string& what, FileRecord* f);
  Status refuse(const RawFd& r, const std::string& what, const FileRecord& f) const;
  // The tool's own copy of a target fd, for what only the open file can say.
  Result<UniqueFd> copy_of(int fd, const std::string& what);
  bool held_by_other_member(const std::string& link);
  std::string link_of(const RawFd& r) const { return fd_dir_ + "/" + std::to_string(r.fd); }
  // A path that no process outside the job may hold too.
  void must_not_be_shared(const std::string& path);
  bool held_outside_job(const std::string& link);

  const pid_t pid_;
  const std::vector<pid_t>& job_;
  const std::vector<pid_t> members_;
  const bool tcp_outside_;
  const std::string fd_dir_;
  std::vector<FileRecord>* out_;
  std::vector<RawFd> raw_;
  UniqueFd pidfd_;
  std::optional<std::set<uint64_t>> job_sockets_;
  std::optional<std::set<int>> pty_masters_;
  std::optional<std::map<std::string, std::set<pid_t>>> member_links_;
  std::map<std::string, bool> outside_;  // link -> held by a process outside the job
  uint64_t saved_bytes_ = 0;
  std::vector<std::string> shared_links_;                       // pipes, FIFOs, pty slaves
  std::map<std::pair<uint64_t, uint64_t>, int> first_of_file_;  // (dev, ino) -> its first fd
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint64_t>> pipe_params_, deleted_params_;
};

Status FdCollector::list(int tracker_fd) {
  DIR* d = ::opendir(fd_dir_.c_str());
  if (!d) return sys_error("listing " + fd_dir_);
  std::vector<int> fds;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') fds.push_back(std::atoi(e->d_name));
  ::closedir(d);
  std::sort(fds.begin(), fds.end());
  for (int fd : fds) {
    RawFd r;
    r.fd = fd;
    const std::string link = fd_dir_ + "/" + std::to_string(fd);
    auto target = read_link(link);
    if (!target.ok()) continue;  // closed meanwhile
    if (fd == tracker_fd && *target == "anon_inode:[userfaultfd]") continue;
    r.link = *target;
    CKPT_ASSIGN(r.info, read_file(proc_path(pid_, "fdinfo/") + std::to_string(fd)));
    if (::stat(link.c_str(), &r.st) != 0)
      return sys_error("fd " + std::to_string(fd) + ": " + r.link);
    raw_.push_back(std::move(r));
  }
  return {};
}

Status FdCollector::collect_all() {
  for (size_t i = 0; i < raw_.size(); ++i) CKPT_TRY(collect(i));
  return {};
}

Status FdCollector::collect(size_t i) {
  const RawFd& r = raw_[i];
  FileRecord f;
  f.fd = r.fd;
  f.path = r.link;
  unsigned flags = 0;
  if (const char* p = field(r.info, "pos:")) f.offset = std::strtoull(p, nullptr, 10);
  if (const char* p = field(r.info, "flags:")) flags = unsigned(std::strtoul(p, nullptr, 8));
  f.fd_flags = (flags & O_CLOEXEC) ? FD_CLOEXEC : 0;
  f.flags = flags & ~unsigned(O_CLOEXEC);
  f.dev = r.st.st_dev;
  f.ino = r.st.st_ino;
  f.size = uint64_t(r.st.st_size);
  f.mtime_ns = mtime_ns(r.st);
  const std::string what = "fd " + std::to_string(r.fd) + ": " + f.path;
  if (is_secretmem(f.path)) return make_error(ENOTSUP, what + ": " + kSecretmemRefusal);
  if (inherited_stdio(r, f)) {
    f.kind = FileKind::kInheritStdio;  // stays connected to cr_restart's own
    out_->push_back(std::move(f));
    return {};
  }
  if (const int d = dup_of(i); d >= 0) {  // restored as a dup, sharing offset and flags
    for (const FileRecord& e : *out_)
      if (e.fd == d) f.kind = e.kind;
    f.dup_of = d;
    out_->push_back(std::move(f));
    return {};
  }
  // State an open file can carry that a reopen would silently drop: its
  // locks, and the owner of its signals (sockets have one for SIGURG even
  // without O_ASYNC).
  if (field(r.info, "lock:")) CKPT_TRY(collect_locks(r, what, &f));
  if ((flags & O_ASYNC) || S_ISSOCK(r.st.st_mode)) {
    CKPT_ASSIGN(UniqueFd copy, copy_of(r.fd, what));
    CKPT_TRY(collect_owner(copy.get(), what, &f));
  }
  CKPT_TRY(collect_by_kind(r, what, &f));
  if (saved_bytes_ > kMaxSavedBytes)
    return make_error(EFBIG, what + ": deleted files and unread pipe data exceed the " +
                                 std::to_string(kMaxSavedBytes >> 20) +
                                 " MiB a checkpoint saves of them");
  out_->push_back(std::move(f));
  return {};
}

bool FdCollector::inherited_stdio(const RawFd& r, const FileRecord& f) {
  if (r.fd > 2) return false;
  const bool is_pipe = S_ISFIFO(r.st.st_mode) && f.path.starts_with("pipe:");
  const bool is_tty =
      S_ISCHR(r.st.st_mode) && (f.path.starts_with("/dev/pts/") || f.path.starts_with("/dev/tty") ||
                                f.path == "/dev/console");
  // A pty whose master a member holds, or a pipe to another member: the
  // job's own, restored with it, even on fds 0-2.
  if (is_tty) {
    const int pts = tty::pts_index(f.path);
    if (pts >= 0 && !pty_masters_) pty_masters_ = tty::job_pty_masters(members_);
    return !(pts >= 0 && pty_masters_->count(pts));
  }
  // A pipe several members hold on their fds 0-2 is still the launcher's
  // (`cr_run -- make | tee log`: make and its compilers share the write end)
  // when a process outside the job holds it too.
  return is_pipe && (!held_by_other_member(f.path) || held_outside_job(f.path));
}

bool FdCollector::held_outside_job(const std::string& link) {
  auto known = outside_.find(link);
  if (known != outside_.end()) return known->second;
  const bool outside = other_holders(pid_, {link}, job_).count(link) > 0;
  outside_[link] = outside;
  return outside;
}

int FdCollector::dup_of(size_t i) const {
  const RawFd& r = raw_[i];
  for (size_t j = 0; j < i; ++j) {
    const FileRecord& e = (*out_)[j];
    if (e.dup_of != -1 || raw_[j].st.st_dev != r.st.st_dev || raw_[j].st.st_ino != r.st.st_ino)
      continue;
    if (kcmp_self(pid_, KCMP_FILE, unsigned(e.fd), unsigned(r.fd)) == 0) return e.fd;
  }
  return -1;
}

Status FdCollector::collect_by_kind(const RawFd& r, const std::string& what, FileRecord* f) {
  const mode_t mode = r.st.st_mode;
  const std::string& path = f->path;
  if (S_ISREG(mode) || S_ISDIR(mode)) return collect_regular(r, what, f);
  if (S_ISCHR(mode) && path.starts_with("/dev/pts/")) {
    const int pts = tty::pts_index(path);
    if (pts >= 0 && !pty_masters_) pty_masters_ = tty::job_pty_masters(members_);
    if (pts >= 0 && pty_masters_->count(pts)) {
      CKPT_ASSIGN(UniqueFd copy, copy_of(r.fd, what));
      return tty::collect_slave(copy.get(), pts, what, f);
    }
    return refuse(r, what, *f);
  }
  if (S_ISCHR(mode) && path == "/dev/ptmx") return collect_ptmx(r, what, f);
  if (S_ISCHR(mode) && (path == "/dev/null" || path == "/dev/zero" || path == "/dev/urandom" ||
                        path == "/dev/random" || path == "/dev/full")) {
    f->kind = FileKind::kCharDevice;
    return {};
  }
  if (S_ISFIFO(mode)) return collect_fifo(r, what, f);
  if (path == "anon_inode:[eventfd]") {
    f->kind = FileKind::kEventfd;
    return collect_eventfd(r, what, f);
  }
  if (path == "anon_inode:[timerfd]") {
    f->kind = FileKind::kTimerfd;
    return collect_timerfd(r, what, f);
  }
  if (path == "anon_inode:[signalfd]") {
    f->kind = FileKind::kSignalfd;
    return collect_signalfd(r, what, f);
  }
  if (path == "anon_inode:inotify") {
    f->kind = FileKind::kInotify;
    CKPT_ASSIGN(auto watches, notify::read_watches(pid_, r.info, what));
    notify::store_watches(watches, f);
    return {};
  }
  if (path == "anon_inode:[eventpoll]") {
    f->kind = FileKind::kEpoll;
    return collect_epoll(pid_, r, what, f, job_);
  }
  if (S_ISSOCK(mode)) return collect_socket(r, what, f);
  return refuse(r, what, *f);
}

// Regular files and directories, reopened by path; a deleted one saved
// whole (several opens of one deleted file: the first carries its content).
Status FdCollector::collect_regular(const RawFd& r, const std::string& what, FileRecord* f) {
  const auto key = std::make_pair(uint64_t(r.st.st_dev), uint64_t(r.st.st_ino));
  const bool first_open = first_of_file_.emplace(key, r.fd).second;
  if (S_ISREG(r.st.st_mode) && r.st.st_nlink == 0) {
    if (f->path.ends_with(" (deleted)")) f->path.resize(f->path.size() - 10);
    if (f->path.empty() || f->path[0] != '/')
      return make_error(ENOTSUP, what + ": deleted file outside the file system tree");
    f->kind = f->path.starts_with("/memfd:") ? FileKind::kMemfd : FileKind::kDeleted;
    if (first_open) {
      CKPT_TRY(collect_deleted(link_of(r), r, what, f));
      saved_bytes_ += f->data.size();
      deleted_params_[key] = f->params;
    } else {
      f->params = deleted_params_[key];
    }
    return {};
  }
  if (f->path.ends_with(" (deleted)"))  // a directory, or a file with another link left
    return make_error(ENOTSUP,
                      what + ": unlinked while open (" +
                          (S_ISDIR(r.st.st_mode) ? "a directory" : "still linked elsewhere") +
                          "): not supported yet");
  f->kind = FileKind::kRegular;
  return {};
}

// Pipes and FIFOs with their unread data (read once per pipe); no process
// outside the job may hold them.
Status FdCollector::collect_fifo(const RawFd& r, const std::string& what, FileRecord* f) {
  const bool is_pipe = f->path.starts_with("pipe:");
  if (!is_pipe && (f->path.empty() || f->path[0] != '/' || f->path.ends_with(" (deleted)")))
    return make_error(ENOTSUP, what + ": FIFO without a path: not supported");
  if (f->flags & O_DIRECT)
    return make_error(ENOTSUP, what + ": packet-mode pipe (O_DIRECT) not supported yet");
  f->kind = is_pipe ? FileKind::kPipe : FileKind::kFifo;
  const auto key = std::make_pair(uint64_t(r.st.st_dev), uint64_t(r.st.st_ino));
  if (first_of_file_.emplace(key, r.fd).second) {
    CKPT_TRY(peek_pipe(link_of(r), what, f));
    saved_bytes_ += f->data.size();
  } else {
    f->params = pipe_params_[key];
  }
  pipe_params_[key] = f->params;
  must_not_be_shared(f->path);
  return {};
}

// A pty master with what it holds; its slave must not be open outside the job.
Status FdCollector::collect_ptmx(const RawFd& r, const std::string& what, FileRecord* f) {
  CKPT_ASSIGN(UniqueFd copy, copy_of(r.fd, what));
  CKPT_TRY(tty::collect_master(copy.get(), r.info, what, f));
  saved_bytes_ += f->data.size();
  must_not_be_shared("/dev/pts/" + std::to_string(f->params[image::kPtyIndex]));
  return {};
}

Status FdCollector::collect_socket(const RawFd& r, const std::string& what, FileRecord* f) {
  CKPT_ASSIGN(UniqueFd sock, copy_of(r.fd, what));
  int family = 0, protocol = 0;
  socklen_t len = sizeof family;
  ::getsockopt(sock.get(), SOL_SOCKET, SO_DOMAIN, &family, &len);
  len = sizeof protocol;
  ::getsockopt(sock.get(), SOL_SOCKET, SO_PROTOCOL, &protocol, &len);
  const bool inet = family == AF_INET || family == AF_INET6;
  if (inet && protocol == IPPROTO_TCP) {
    if (!job_sockets_) job_sockets_ = sockets::job_socket_inodes(members_);
    CKPT_TRY(sockets::collect_tcp(pid_, sock.get(), *job_sockets_, tcp_outside_, what, f));
  } else if (inet && protocol == IPPROTO_UDP) {
    CKPT_TRY(sockets::collect_udp(pid_, sock.get(), what, f));
  } else if (family == AF_UNIX) {
    if (!job_sockets_) job_sockets_ = sockets::job_socket_inodes(members_);
    CKPT_TRY(sockets::collect_unix(sock.get(), r.st.st_ino, *job_sockets_, what, f));
  } else {
    return make_error(ENOTSUP, "fd " + std::to_string(r.fd) + ": " +
                                   describe_socket(pid_, r.st.st_ino) + ": not supported yet");
  }
  saved_bytes_ += f->data.size();
  return {};
}

Status FdCollector::refuse(const RawFd& r, const std::string& what, const FileRecord& f) const {
  if (f.path.starts_with("anon_inode:"))  // inotify, pidfd, io_uring, perf_event...
    return make_error(ENOTSUP, what + anon_inode_name(f.path) + ": not supported yet");
  const bool is_tty =
      S_ISCHR(r.st.st_mode) && (f.path.starts_with("/dev/pts/") || f.path.starts_with("/dev/tty") ||
                                f.path == "/dev/console");
  const char* kind = is_tty                  ? "terminal"
                     : S_ISCHR(r.st.st_mode) ? "character device"
                     : S_ISBLK(r.st.st_mode) ? "block device"
                                             : "file of this type";
  return make_error(ENOTSUP, what + ": " + kind + " not supported yet");
}

Result<UniqueFd> FdCollector::copy_of(int fd, const std::string& what) {
  if (!pidfd_.valid()) pidfd_.reset(int(::syscall(SYS_pidfd_open, pid_, 0)));
  UniqueFd copy(int(::syscall(SYS_pidfd_getfd, pidfd_.get(), fd, 0)));
  if (!copy.valid()) return sys_error(what + ": taking a copy (pidfd_getfd)");
  return copy;
}

bool FdCollector::held_by_other_member(const std::string& link) {
  if (!member_links_) {
    member_links_.emplace();
    for (pid_t m : members_)
      if (m != pid_)
        for (const proc::FdLink& l : proc::fd_links(m)) (*member_links_)[l.target].insert(m);
  }
  return member_links_->count(link) > 0;
}

void FdCollector::must_not_be_shared(const std::string& path) {
  if (std::find(shared_links_.begin(), shared_links_.end(), path) == shared_links_.end())
    shared_links_.push_back(path);
}

// A pipe, FIFO or pty held by a process outside the job cannot be restored
// with only one side of it.
Status FdCollector::check_shared_links() const {
  if (shared_links_.empty()) return {};
  auto holders = other_holders(pid_, shared_links_, job_);
  for (const FileRecord& f : *out_) {
    if (f.dup_of != -1) continue;  // a dup has no params; its original is checked
    const bool pty = tty::is_master(f.kind);
    auto h = holders.find(pty ? "/dev/pts/" + std::to_string(f.params[image::kPtyIndex]) : f.path);
    if (h == holders.end() || (f.kind != FileKind::kPipe && f.kind != FileKind::kFifo && !pty))
      continue;
    return make_error(ENOTSUP, "fd " + std::to_string(f.fd) + ": " + f.path + ": also open in " +
                                   h->second +
                                   ", which is not in the job: checkpoint the whole job "
                                   "(--tree of a common ancestor)");
  }
  return {};
}

}  // namespace

Status collect_files(pid_t pid, int tracker_fd, std::vector<FileRecord>* out,
                     const std::vector<pid_t>& job, bool tcp_outside) {
  FdCollector c(pid, job, tcp_outside, out);
  CKPT_TRY(c.list(tracker_fd));
  CKPT_TRY(c.collect_all());
  return c.check_shared_links();
}

}  // namespace ckpt::dump
