// What each kind of open file holds beyond its path (fd_kinds.hpp).
#include "dump/fd_kinds.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "proc/fd_links.hpp"
#include "proc/file_locks.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::dump::fds {

using image::FileKind;
using image::FileRecord;

// The value after "KEY" at the start of a line of an fdinfo text (nullptr if absent).
const char* field(const std::string& info, const char* key) {
  size_t klen = std::strlen(key);
  for (size_t at = 0; at < info.size();) {
    if (info.compare(at, klen, key) == 0) return info.c_str() + at + klen;
    at = info.find('\n', at);
    if (at == std::string::npos) break;
    ++at;
  }
  return nullptr;
}

long kcmp_self(pid_t pid, int type, unsigned long a, unsigned long b) {
  return ::syscall(SYS_kcmp, pid, pid, type, a, b);
}

// ---- sockets: only described, for the refusal message ----------------------

namespace {

std::string ipv4(const std::string& hex8) {
  uint32_t a = uint32_t(std::strtoul(hex8.c_str(), nullptr, 16));
  char b[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, b, sizeof b);
  return b;
}

std::string ipv6(const std::string& hex32) {
  uint32_t w[4];
  for (int i = 0; i < 4; ++i)
    w[i] = uint32_t(std::strtoul(hex32.substr(size_t(i) * 8, 8).c_str(), nullptr, 16));
  char b[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, w, b, sizeof b);
  return std::string("[") + b + "]";
}

// "ADDR:PORT" from /proc/net/tcp's "0100007F:1F90".
std::string endpoint(const std::string& s) {
  size_t colon = s.find(':');
  if (colon == std::string::npos) return s;
  std::string addr = s.substr(0, colon);
  unsigned port = unsigned(std::strtoul(s.c_str() + colon + 1, nullptr, 16));
  return (addr.size() == 32 ? ipv6(addr) : ipv4(addr)) + ":" + std::to_string(port);
}

}  // namespace

// Finds socket inode `ino` in the target's /proc/PID/net tables.
std::string describe_socket(pid_t pid, uint64_t ino) {
  const std::string want = std::to_string(ino);
  std::string found;
  for (const char* table : {"tcp", "tcp6", "udp", "udp6"}) {
    auto text = read_file(proc_path(pid, std::string("net/") + table));
    if (!text.ok()) continue;
    for_each_line(
        *text,
        [&](const std::string& line) {
          char local[64], remote[64], inode[32];
          unsigned st;
          if (std::sscanf(line.c_str(), " %*s %63s %63s %x %*s %*s %*s %*s %*s %31s", local, remote,
                          &st, inode) != 4 ||
              want != inode)
            return true;
          bool tcp = table[0] == 't';
          std::string what = tcp ? "TCP socket " : "UDP socket ";
          if (tcp && st == 0x0A) {
            found = what + "listening on " + endpoint(local);
            return false;
          }
          std::string peer = endpoint(remote);
          bool unconnected = peer.find_first_not_of("0.:[]") == std::string::npos ||
                             peer.substr(peer.rfind(':')) == ":0";
          found = what + endpoint(local) + (unconnected ? "" : " -> " + peer);
          return false;
        },
        1);
    if (!found.empty()) return found;
  }
  if (auto text = read_file(proc_path(pid, "net/unix")); text.ok()) {
    for_each_line(
        *text,
        [&](const std::string& line) {
          unsigned type = 0;
          char inode[32];
          int n = 0;
          if (std::sscanf(line.c_str(), "%*s %*s %*s %*s %x %*s %31s%n", &type, inode, &n) < 2 ||
              want != inode)
            return true;
          std::string path = line.substr(size_t(n));
          path.erase(0, path.find_first_not_of(' '));
          const char* kind = type == 1 ? "stream" : type == 2 ? "datagram" : "seqpacket";
          found = std::string("UNIX ") + kind + " socket " + (path.empty() ? "(unnamed)" : path);
          return false;
        },
        1);
    if (!found.empty()) return found;
  }
  return "socket:[" + want + "] (not TCP, UDP or UNIX)";
}

// ---- pipes and FIFOs --------------------------------------------------------

// The unread bytes of the pipe behind /proc/PID/fd/N, without consuming
// them: a second read end (opened through /proc) tee(2)s the pipe's buffers
// into a scratch pipe of the same capacity, and those are read back.
Status peek_pipe(const std::string& link_path, const std::string& what, FileRecord* f) {
  UniqueFd rd(::open(link_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!rd.valid()) return sys_error("opening " + what + " to read its unread data");
  int cap = ::fcntl(rd.get(), F_GETPIPE_SZ);
  int avail = 0;
  if (cap < 0 || ::ioctl(rd.get(), FIONREAD, &avail) != 0) return sys_error(what);
  f->params.assign(image::kPipeParams, 0);
  f->params[image::kPipeCapacity] = uint64_t(cap);
  if (avail == 0) return {};
  int sp[2];
  if (::pipe2(sp, O_CLOEXEC | O_NONBLOCK) != 0) return sys_error("pipe");
  UniqueFd sr(sp[0]), sw(sp[1]);
  if (::fcntl(sw.get(), F_SETPIPE_SZ, cap) < cap) return sys_error("sizing a scratch pipe");
  ssize_t n = ::tee(rd.get(), sw.get(), size_t(avail), SPLICE_F_NONBLOCK);
  if (n != avail)
    return n < 0 ? sys_error("copying the unread data of " + what)
                 : make_error(EIO, what + ": could copy only " + std::to_string(n) + " of " +
                                       std::to_string(avail) + " unread bytes");
  f->data.resize(size_t(avail));
  size_t got = 0;
  while (got < f->data.size()) {
    ssize_t r = ::read(sr.get(), f->data.data() + got, f->data.size() - got);
    if (r <= 0) return sys_error("reading the unread data of " + what);
    got += size_t(r);
  }
  return {};
}

// Other processes that hold one of `files` (pipes by "pipe:[ino]", FIFOs by
// path): a pipe shared with another process cannot be restored with only
// one side of it. Returns the first one found, as "PID N (comm)".
std::map<std::string, std::string> other_holders(pid_t pid, const std::vector<std::string>& links,
                                                 const std::vector<pid_t>& job) {
  std::map<std::string, std::string> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    char* end;
    long p = std::strtol(e->d_name, &end, 10);
    if (*end || p <= 0 || p == pid || p == self ||
        std::find(job.begin(), job.end(), pid_t(p)) != job.end())
      continue;
    std::string dir = "/proc/" + std::string(e->d_name) + "/fd";
    DIR* fds = ::opendir(dir.c_str());
    if (!fds) continue;
    while (dirent* f = ::readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      auto t = read_link(dir + "/" + f->d_name);
      if (!t.ok() || out.count(*t) || std::find(links.begin(), links.end(), *t) == links.end())
        continue;
      auto c = read_file("/proc/" + std::string(e->d_name) + "/comm");
      std::string comm = c.ok() ? *c : "?";
      if (!comm.empty() && comm.back() == '\n') comm.pop_back();
      out[*t] = "PID " + std::string(e->d_name) + " (" + comm + ")";
    }
    ::closedir(fds);
  }
  ::closedir(d);
  return out;
}

// ---- anonymous-inode files --------------------------------------------------

Status collect_eventfd(const RawFd& r, const std::string& what, FileRecord* f) {
  const char* count = field(r.info, "eventfd-count:");
  const char* sem = field(r.info, "eventfd-semaphore:");
  if (!count) return make_error(EPROTO, what + ": no eventfd-count in fdinfo");
  if (!sem)
    return make_error(ENOTSUP,
                      what + ": this kernel does not report EFD_SEMAPHORE: not supported here");
  f->params.assign(image::kEventfdParams, 0);
  f->params[image::kEventfdCount] = std::strtoull(count, nullptr, 16);
  f->params[image::kEventfdSemaphore] = std::strtoul(sem, nullptr, 10) ? 1 : 0;
  return {};
}

Status collect_timerfd(const RawFd& r, const std::string& what, FileRecord* f) {
  const char *clock = field(r.info, "clockid:"), *ticks = field(r.info, "ticks:"),
             *sflags = field(r.info, "settime flags:"), *value = field(r.info, "it_value:"),
             *interval = field(r.info, "it_interval:");
  unsigned long long vs, vns, is, ins;
  if (!clock || !ticks || !sflags || !value || !interval ||
      std::sscanf(value, " (%llu, %llu)", &vs, &vns) != 2 ||
      std::sscanf(interval, " (%llu, %llu)", &is, &ins) != 2)
    return make_error(EPROTO, what + ": unexpected timerfd fdinfo");
  f->params.assign(image::kTimerfdParams, 0);
  const int clk = std::atoi(clock);
  f->params[image::kTimerfdClock] = uint64_t(clk);
  f->params[image::kTimerfdSetFlags] = std::strtoul(sflags, nullptr, 8);
  f->params[image::kTimerfdValueNs] = vs * 1000000000ull + vns;
  f->params[image::kTimerfdIntervalNs] = is * 1000000000ull + ins;
  f->params[image::kTimerfdTicks] = std::strtoull(ticks, nullptr, 10);
  if (f->params[image::kTimerfdValueNs]) {
    // fdinfo shows the time left; the deadline on the timer's own clock lets
    // restore keep an absolute wall-clock expiry (docs/state.md).
    timespec now{};
    int base = clk == CLOCK_REALTIME_ALARM   ? CLOCK_REALTIME
               : clk == CLOCK_BOOTTIME_ALARM ? CLOCK_BOOTTIME
                                             : clk;
    if (::clock_gettime(base, &now) != 0) return sys_error(what + ": clock_gettime");
    f->params[image::kTimerfdDeadlineNs] = uint64_t(now.tv_sec) * 1000000000ull +
                                           uint64_t(now.tv_nsec) +
                                           f->params[image::kTimerfdValueNs];
  }
  return {};
}

Status collect_signalfd(const RawFd& r, const std::string& what, FileRecord* f) {
  const char* mask = field(r.info, "sigmask:");
  if (!mask) return make_error(EPROTO, what + ": no sigmask in fdinfo");
  f->params.assign(image::kSignalfdParams, 0);
  f->params[image::kSignalfdMask] = std::strtoull(mask, nullptr, 16);
  return {};
}

namespace {

// Whether another member that holds the epoll at `epfd` of `pid` (the same
// open file) has, at its fd `slot.tfd`, the file registered there: a
// registration it made through its own fd after a fork. Its record lists it.
bool registered_by_other(pid_t pid, int epfd, kcmp_epoll_slot slot,
                         const std::vector<pid_t>& members) {
  for (pid_t m : members) {
    if (m == pid) continue;
    for (const proc::FdLink& l : proc::fd_links(m))
      if (l.target == "anon_inode:[eventpoll]" &&
          ::syscall(SYS_kcmp, m, pid, KCMP_FILE, l.fd, epfd) == 0 &&
          ::syscall(SYS_kcmp, m, pid, KCMP_EPOLL_TFD, slot.tfd,
                    reinterpret_cast<unsigned long>(&slot)) == 0)
        return true;
  }
  return false;
}

}  // namespace

// The interest list: one "tfd: N events: X data: Y ..." line per watched file.
// Restore registers the fd number the program used, so the file must still
// be at fd N (kcmp): in this process (listed here), or, for an epoll shared
// between members, in another member holding it (listed in its record).
Status collect_epoll(pid_t pid, const RawFd& r, const std::string& what, FileRecord* f,
                     const std::vector<pid_t>& members) {
  std::map<int, unsigned> same_fd;  // kcmp's toff: earlier registrations of that fd number
  size_t at = 0;
  while ((at = r.info.find("tfd:", at)) != std::string::npos) {
    int tfd;
    unsigned events;
    unsigned long long data;
    if (std::sscanf(r.info.c_str() + at, "tfd: %d events: %x data: %llx", &tfd, &events, &data) !=
        3)
      return make_error(EPROTO, what + ": unexpected epoll fdinfo");
    at += 4;
    kcmp_epoll_slot slot{__u32(r.fd), __u32(tfd), same_fd[tfd]++};
    if (kcmp_self(pid, KCMP_EPOLL_TFD, unsigned(tfd), reinterpret_cast<unsigned long>(&slot)) ==
        0) {
      f->params.insert(f->params.end(), {uint64_t(tfd), events, data});
      continue;
    }
    if (!registered_by_other(pid, r.fd, slot, members))
      return make_error(ENOTSUP, what + ": watches a file no longer open at fd " +
                                     std::to_string(tfd) + ": not supported");
  }
  return {};
}

// The locks held through this open file (docs/state.md, "File locks"):
// flock and OFD locks of its open file description, POSIX locks of this
// process taken through it. A line that cannot be read refuses the
// checkpoint rather than drop a lock.
Status collect_locks(const RawFd& r, const std::string& what, FileRecord* f) {
  size_t lines = 0;
  for_each_line(r.info, [&](const std::string& l) {
    lines += l.compare(0, 5, "lock:") == 0;
    return true;
  });
  const std::vector<proc::LockLine> locks = proc::fdinfo_locks(r.info);
  if (locks.size() != lines) return make_error(EPROTO, what + ": unexpected lock line in fdinfo");
  for (const proc::LockLine& l : locks) {
    image::FileLock k;
    if (l.kind == "FLOCK") {
      k.kind = image::LockKind::kFlock;
    } else if (l.kind == "POSIX") {
      k.kind = image::LockKind::kPosix;
    } else if (l.kind == "OFDLCK") {
      k.kind = image::LockKind::kOfd;
    } else if (l.kind == "LEASE") {
      return make_error(ENOTSUP, what + ": holds a file lease (F_SETLEASE): not supported");
    } else {
      return make_error(ENOTSUP, what + ": holds a lock of kind " + l.kind + ": not supported");
    }
    if (l.type != "READ" && l.type != "WRITE")
      return make_error(EPROTO, what + ": a lock of type " + l.type + " in fdinfo");
    k.type = l.type == "READ" ? F_RDLCK : F_WRLCK;
    k.start = l.start;
    k.end = l.end;
    k.pid = l.pid;
    f->locks.push_back(k);
  }
  return {};
}

// Signal-driven I/O: who gets the signal (F_SETOWN, F_SETOWN_EX) and which
// (F_SETSIG), both kept by the open file description, read on a copy of it.
Status collect_owner(int copy, const std::string& what, FileRecord* f) {
  f_owner_ex o{};
  if (::fcntl(copy, F_GETOWN_EX, &o) != 0) return sys_error(what + ": F_GETOWN_EX");
  const int sig = ::fcntl(copy, F_GETSIG);
  if (sig < 0) return sys_error(what + ": F_GETSIG");
  f->owner = {int32_t(o.type), int32_t(o.pid), int32_t(sig)};
  return {};
}

// Reads a deleted file's content through the process's own link to it.
Status collect_deleted(const std::string& link_path, const RawFd& r, const std::string& what,
                       FileRecord* f) {
  const uint64_t size = uint64_t(r.st.st_size);
  if (size > kMaxDeletedFileBytes)
    return make_error(EFBIG, what + ": deleted file of " + std::to_string(size) +
                                 " bytes: more than the " +
                                 std::to_string(kMaxDeletedFileBytes >> 20) +
                                 " MiB a checkpoint saves of a deleted file");
  UniqueFd in(::open(link_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return sys_error("opening " + what + " to save its content");
  f->data.resize(size);
  CKPT_TRY(read_exact(in.get(), f->data.data(), size, 0, what));
  f->params = {uint64_t(r.st.st_mode & 07777), r.st.st_uid, r.st.st_gid};
  if (f->kind == FileKind::kMemfd) {
    int seals = ::fcntl(in.get(), F_GET_SEALS);
    if (seals < 0) return sys_error(what + ": F_GET_SEALS");
    f->params.push_back(uint64_t(seals));
  }
  return {};
}

}  // namespace ckpt::dump::fds
