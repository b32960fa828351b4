// Recreating the UDP sockets of a job (udp.hpp). Each socket is made and
// bound in the restorer before any member exists; queues are refilled only
// once every socket of the job exists, each datagram sent again from its
// sender's address and port: from the job's socket with that port when
// there is one (the source address chosen with IP_PKTINFO), else from a
// stand-in socket bound to it. A connected socket connects after its
// refill: it would drop datagrams from anyone but its peer.
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "sockets/udp.hpp"

namespace ckpt::sockets {

using image::FileRecord;

namespace {

bool is_any(const Endpoint& e) {
  static const std::array<uint8_t, 16> zero{};
  return e.addr == zero;
}

// The IPv4 address behind an IPv4-mapped IPv6 one, else `e` itself.
Endpoint unmapped(const Endpoint& e) {
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (e.family != AF_INET6 || std::memcmp(e.addr.data(), kMapped, 12) != 0) return e;
  Endpoint v4;
  v4.family = AF_INET;
  v4.port = e.port;
  std::memcpy(v4.addr.data(), e.addr.data() + 12, 4);
  return v4;
}

// `e` as an address a socket of `family` can send to or bind.
Endpoint in_family(const Endpoint& e, int family) {
  Endpoint u = unmapped(e);
  if (u.family == family) return u;
  Endpoint m;  // an IPv4 address for an IPv6 socket: mapped
  m.family = AF_INET6;
  m.port = u.port;
  m.addr[10] = m.addr[11] = 0xff;
  std::memcpy(m.addr.data() + 12, u.addr.data(), 4);
  return m;
}

Status set_opt(int fd, int level, int opt, int v, const std::string& what, const char* name) {
  if (::setsockopt(fd, level, opt, &v, sizeof v) != 0) return sys_error(what + ": setting " + name);
  return {};
}

// Whether datagram `k` of `queue` is in `fd`'s queue where it belongs: one
// peek at the offset of the bytes before it (fd is the restorer's: nothing
// else reads it yet). A peek skips whole datagrams at an offset, so this
// walks the queue once; sent in order from one CPU, the datagrams before it
// are there too (one missing would put another at that offset). The
// datagrams before `k` must not be empty: a peek marks an empty datagram so
// that no later peek at an offset shows it (the next checkpoint's).
bool arrived(int fd, const std::vector<UdpJob::Datagram>& queue, size_t k) {
  uint64_t before = 0;
  for (size_t i = 0; i < k; ++i) before += queue[i].data.size();
  if (before > uint64_t(INT32_MAX)) return true;  // no offset reaches it: not checked
  int off = int(before);
  ::setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off);
  std::vector<uint8_t> b(queue[k].data.size() + 1);
  const ssize_t n = ::recv(fd, b.data(), b.size(), MSG_PEEK | MSG_DONTWAIT);
  off = -1;
  ::setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off);
  return n == ssize_t(queue[k].data.size()) &&
         std::equal(queue[k].data.begin(), queue[k].data.end(), b.begin());
}

// Whether `e`'s address is one of this node's (a bind without FREEBIND
// succeeds): refills only ever go to the restored socket on this node.
bool is_local(const Endpoint& e) {
  Endpoint probe = e;
  probe.port = 0;
  UniqueFd t(::socket(e.family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_storage a;
  socklen_t len = sockaddr_of(probe, &a);
  return t.valid() && ::bind(t.get(), reinterpret_cast<sockaddr*>(&a), len) == 0;
}

// Makes `mh` carry one control message: `ctl` must hold CMSG_SPACE(len).
void put_control(msghdr* mh, char* ctl, int level, int type, const void* data, size_t len) {
  mh->msg_control = ctl;
  mh->msg_controllen = CMSG_SPACE(len);
  cmsghdr* c = CMSG_FIRSTHDR(mh);
  c->cmsg_level = level;
  c->cmsg_type = type;
  c->cmsg_len = CMSG_LEN(len);
  std::memcpy(CMSG_DATA(c), data, len);
}

}  // namespace

Result<UniqueFd> restore_udp(const FileRecord& f, const std::string& what, UdpJob* job) {
  const auto& p = f.params;
  if (p.size() < image::kUdpParams || (p.size() - image::kUdpParams) % image::kUdpDgramWords != 0)
    return make_error(EBADMSG, what + ": UDP record is malformed");
  const int family = int(p[image::kUdpFamily]);
  if (family != AF_INET && family != AF_INET6)
    return make_error(EBADMSG, what + ": UDP record has an unknown family");
  UdpJob::Socket s;
  s.what = what;
  s.local = load_endpoint(family, &p[image::kUdpLocalPort]);
  s.peer = load_endpoint(family, &p[image::kUdpPeerPort]);
  s.connected = s.peer.port != 0;
  s.rcvbuf = int(p[image::kUdpRcvBuf] / 2);  // getsockopt reports twice what was set
  s.peek_off = p[image::kUdpPeekOff];
  uint64_t need = 0;
  for (size_t i = image::kUdpParams; i < p.size(); i += image::kUdpDgramWords) {
    const uint64_t* d = &p[i];
    if (d[image::kUdpDgramLen] > 65536 || need + d[image::kUdpDgramLen] > f.data.size())
      return make_error(EBADMSG, what + ": UDP record's lengths do not match its data");
    UdpJob::Datagram g;
    g.from = load_endpoint(int(d[image::kUdpDgramFamily]), &d[image::kUdpDgramFromPort]);
    const uint64_t to[3] = {s.local.port, d[image::kUdpDgramToAddr], d[image::kUdpDgramToAddr + 1]};
    g.to = load_endpoint(family, to);
    g.data.assign(f.data.begin() + long(need),
                  f.data.begin() + long(need + d[image::kUdpDgramLen]));
    need += d[image::kUdpDgramLen];
    s.queue.push_back(std::move(g));
  }
  if (need != f.data.size())
    return make_error(EBADMSG, what + ": UDP record's lengths do not match its data");

  UniqueFd sock(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return sys_error(what + ": creating the socket");
  const int fd = sock.get();
  const uint64_t o = p[image::kUdpOptions];
  const int level = family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
  // What bind(2) depends on, first.
  if (o & image::kUdpOptReuseAddr)
    CKPT_TRY(set_opt(fd, SOL_SOCKET, SO_REUSEADDR, 1, what, "SO_REUSEADDR"));
  if (o & image::kUdpOptReusePort)
    CKPT_TRY(set_opt(fd, SOL_SOCKET, SO_REUSEPORT, 1, what, "SO_REUSEPORT"));
  if (family == AF_INET6)
    CKPT_TRY(set_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY, (o & image::kUdpOptV6Only) ? 1 : 0, what,
                     "IPV6_V6ONLY"));
  if (s.local.port != 0 || !is_any(s.local)) {
    sockaddr_storage a;
    socklen_t len = sockaddr_of(s.local, &a);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0)
      return sys_error(what + ": binding " + describe(s.local));
  }
  if (o & image::kUdpOptBroadcast)
    CKPT_TRY(set_opt(fd, SOL_SOCKET, SO_BROADCAST, 1, what, "SO_BROADCAST"));
  if (o & image::kUdpOptPktInfo)  // before the refill: the kernel notes it per datagram
    CKPT_TRY(set_opt(fd, level, family == AF_INET6 ? IPV6_RECVPKTINFO : IP_PKTINFO, 1, what,
                     "IP_PKTINFO"));
  if (o & image::kUdpOptRecvErr)
    CKPT_TRY(
        set_opt(fd, level, family == AF_INET6 ? IPV6_RECVERR : IP_RECVERR, 1, what, "IP_RECVERR"));
  CKPT_TRY(set_opt(fd, level, family == AF_INET6 ? IPV6_TCLASS : IP_TOS, int(p[image::kUdpTos]),
                   what, "IP_TOS"));
  if (p[image::kUdpTtl])  // 0: the system's default
    CKPT_TRY(set_opt(fd, level, family == AF_INET6 ? IPV6_UNICAST_HOPS : IP_TTL,
                     int(p[image::kUdpTtl]), what, "IP_TTL"));
  if (const int v = int(p[image::kUdpSndBuf] / 2);
      v > 0 && ::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof v) != 0)
    CKPT_TRY(set_opt(fd, SOL_SOCKET, SO_SNDBUF, v, what, "SO_SNDBUF"));
  for (auto [opt, param, name] : {std::tuple{SO_RCVTIMEO, image::kUdpRcvTimeoUs, "SO_RCVTIMEO"},
                                  std::tuple{SO_SNDTIMEO, image::kUdpSndTimeoUs, "SO_SNDTIMEO"}}) {
    const timeval tv{time_t(p[param] / 1000000), suseconds_t(p[param] % 1000000)};
    if (p[param] && ::setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv) != 0)
      return sys_error(what + ": setting " + name);
  }
  if (!s.queue.empty()) {
    // Room for the refill whatever the program's limit (set back after it).
    const int big = int(std::min<uint64_t>(need * 4 + s.queue.size() * 2048 + (1 << 20), 1 << 30));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  }
  if ((f.flags & O_NONBLOCK) && ::fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
    return sys_error(what + ": setting O_NONBLOCK");
  s.fd = fd;
  job->sockets.push_back(std::move(s));
  return sock;
}

namespace {

// The job's queued datagrams sent again, each from its sender's address:
// the job's own socket with that port and address (or bound to any
// address), else a stand-in bound to the sender's address.
class Refill {
 public:
  explicit Refill(UdpJob* job) : job_(job) {}
  Status run();

 private:
  struct Sender {
    int fd = -1;
    int family = 0;
  };
  Result<Sender> sender_for(const Endpoint& from, const std::string& what);
  Result<UniqueFd> stand_in(const Endpoint& from, const std::string& what);
  Status send(const Sender& sender, const Endpoint& from, const UdpJob::Datagram& d,
              const std::string& what);

  UdpJob* job_;
  std::map<std::pair<int, std::string>, UniqueFd> stand_ins_;  // (family, "addr:port")
  std::set<std::string> local_ok_;                             // destinations checked local
};

// One CPU while refilling: loopback datagrams wait in a per-CPU backlog, so
// sends from one CPU arrive in the order they were sent.
Status Refill::run() {
  cpu_set_t saved, one;
  const bool pinned = ::sched_getaffinity(0, sizeof saved, &saved) == 0 && ::sched_getcpu() >= 0;
  if (pinned) {
    CPU_ZERO(&one);
    CPU_SET(::sched_getcpu(), &one);
    ::sched_setaffinity(0, sizeof one, &one);
  }
  Status st;
  for (const UdpJob::Socket& r : job_->sockets) {
    for (const UdpJob::Datagram& d : r.queue) {
      const Endpoint from = unmapped(d.from);
      auto sender = sender_for(from, r.what);
      st = sender.ok() ? send(*sender, from, d, r.what) : Status(sender.error());
      if (!st.ok()) break;
    }
    if (!st.ok()) break;
  }
  if (pinned) ::sched_setaffinity(0, sizeof saved, &saved);
  return st;
}

Result<Refill::Sender> Refill::sender_for(const Endpoint& from, const std::string& what) {
  for (const UdpJob::Socket& s : job_->sockets) {
    const Endpoint l = unmapped(s.local);
    if (s.local.port != from.port || (!is_any(l) && !(l == from))) continue;
    if (is_any(l) && s.local.family == AF_INET && from.family != AF_INET) continue;
    return Sender{s.fd, s.local.family};
  }
  auto key = std::make_pair(from.family, describe(from));
  auto it = stand_ins_.find(key);
  if (it == stand_ins_.end()) {
    CKPT_ASSIGN(UniqueFd h, stand_in(from, what));
    it = stand_ins_.emplace(key, std::move(h)).first;
  }
  return Sender{it->second.get(), from.family};
}

// The sender's address may be one this node does not have (binding it
// needs FREEBIND, sending from it TRANSPARENT).
Result<UniqueFd> Refill::stand_in(const Endpoint& from, const std::string& what) {
  UniqueFd h(::socket(from.family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  int on = 1;
  ::setsockopt(h.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (from.family == AF_INET) {
    ::setsockopt(h.get(), IPPROTO_IP, IP_FREEBIND, &on, sizeof on);
    ::setsockopt(h.get(), IPPROTO_IP, IP_TRANSPARENT, &on, sizeof on);
  } else {
    ::setsockopt(h.get(), IPPROTO_IPV6, IPV6_FREEBIND, &on, sizeof on);
    ::setsockopt(h.get(), IPPROTO_IPV6, IPV6_TRANSPARENT, &on, sizeof on);
  }
  sockaddr_storage a;
  socklen_t len = sockaddr_of(from, &a);
  if (!h.valid() || ::bind(h.get(), reinterpret_cast<sockaddr*>(&a), len) != 0)
    return sys_error(what + ": a queued datagram from " + describe(from) +
                     ": binding a socket to its sender's address to send it again");
  return h;
}

// With the sender's own address as the source (a job socket bound to any
// address would let the route pick one), retried while the sender's buffer
// is full until loopback delivers.
Status Refill::send(const Sender& sender, const Endpoint& from, const UdpJob::Datagram& d,
                    const std::string& what) {
  const Endpoint to = in_family(d.to, sender.family);
  const std::string to_key = describe(to);
  if (!local_ok_.count(to_key) && !is_local(to))
    return make_error(EADDRNOTAVAIL, what + ": a queued datagram was sent to " + describe(to) +
                                         ", which is not an address of this node");
  local_ok_.insert(to_key);
  sockaddr_storage dst;
  socklen_t dst_len = sockaddr_of(to, &dst);
  iovec iov{const_cast<uint8_t*>(d.data.data()), d.data.size()};
  msghdr mh{};
  mh.msg_name = &dst;
  mh.msg_namelen = dst_len;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
  const Endpoint src = in_family(from, sender.family);
  if (sender.family == AF_INET) {
    in_pktinfo pi{};
    std::memcpy(&pi.ipi_spec_dst, src.addr.data(), 4);
    put_control(&mh, ctl, IPPROTO_IP, IP_PKTINFO, &pi, sizeof pi);
  } else if (!IN6_IS_ADDR_V4MAPPED(reinterpret_cast<const in6_addr*>(src.addr.data()))) {
    in6_pktinfo pi{};
    std::memcpy(&pi.ipi6_addr, src.addr.data(), 16);
    put_control(&mh, ctl, IPPROTO_IPV6, IPV6_PKTINFO, &pi, sizeof pi);
  }
  ssize_t n;
  for (int tries = 0;; ++tries) {
    n = ::sendmsg(sender.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0 || (errno != EINTR && errno != EAGAIN && errno != ENOBUFS) || tries > 2000) break;
    if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (n != ssize_t(d.data.size()))
    return sys_error(what + ": refilling its receive queue from " + describe(from) + " to " +
                     describe(to));
  return {};
}

// Every datagram must have reached its socket (not another one of the same
// port) before a connect would drop those from others. Those after an
// empty datagram are not counted: loopback delivers them in the sender's
// system call almost always; a moment covers the rest.
Status wait_arrived(const UdpJob& job) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool empties = false;
  for (const UdpJob::Socket& s : job.sockets) {
    if (s.queue.empty()) continue;
    size_t want = 0;
    while (want < s.queue.size() && !s.queue[want].data.empty()) ++want;
    empties |= want < s.queue.size();
    if (want == 0) continue;
    bool there;
    while (!(there = arrived(s.fd, s.queue, want - 1)) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!there)
      return make_error(EIO, s.what + ": its " + std::to_string(want) +
                                 " queued datagrams did not all come back (another socket of its "
                                 "port took some, or they were dropped)");
  }
  if (empties) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return {};
}

// Connected as they were, with their buffer size and peek offset.
Status connect_and_set(const UdpJob::Socket& s) {
  if (s.connected) {
    sockaddr_storage a;
    socklen_t len = sockaddr_of(s.peer, &a);
    if (::connect(s.fd, reinterpret_cast<sockaddr*>(&a), len) != 0)
      return sys_error(s.what + ": connecting to " + describe(s.peer));
  }
  if (s.rcvbuf > 0 &&
      ::setsockopt(s.fd, SOL_SOCKET, SO_RCVBUFFORCE, &s.rcvbuf, sizeof s.rcvbuf) != 0)
    CKPT_TRY(set_opt(s.fd, SOL_SOCKET, SO_RCVBUF, s.rcvbuf, s.what, "SO_RCVBUF"));
  if (s.peek_off)
    CKPT_TRY(set_opt(s.fd, SOL_SOCKET, SO_PEEK_OFF, int(int64_t(s.peek_off) - 1), s.what,
                     "SO_PEEK_OFF"));
  return {};
}

}  // namespace

Status finish_udp(UdpJob* job) {
  if (job->sockets.empty()) return {};
  CKPT_TRY(Refill(job).run());
  CKPT_TRY(wait_arrived(*job));
  for (const UdpJob::Socket& s : job->sockets) CKPT_TRY(connect_and_set(s));
  job->sockets.clear();
  return {};
}

}  // namespace ckpt::sockets
