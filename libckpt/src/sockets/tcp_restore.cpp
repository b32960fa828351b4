// Recreating a TCP socket (tcp.hpp). Binding happens in repair mode, which
// lets a port be taken again while the old incarnation's sockets linger in
// TIME-WAIT (listen(2) does not: time_wait.hpp); repair mode clears
// SO_REUSEADDR when it ends, so that option is set afterwards.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "sockets/address.hpp"
#include "sockets/tcp.hpp"
#include "sockets/time_wait.hpp"

namespace ckpt::sockets {

using image::FileRecord;

namespace {

constexpr int kTcpOptMss = 2, kTcpOptWindow = 3, kTcpOptSackPerm = 4, kTcpOptTimestamp = 8;

Status set_int(int sock, int level, int name, int v, const std::string& what, const char* opt) {
  if (::setsockopt(sock, level, name, &v, sizeof v) != 0)
    return sys_error(what + ": setting " + opt);
  return {};
}

Status repair(int sock, int mode, const std::string& what) {
  if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR, &mode, sizeof mode) == 0) return {};
  if (errno == EPERM)
    return make_error(EPERM, what + ": restoring a TCP socket needs CAP_NET_ADMIN (TCP_REPAIR)");
  return sys_error(what + (mode == 1 ? ": entering repair mode" : ": leaving repair mode"));
}

// Options that do not depend on the socket's state.
Status set_options(int sock, const std::vector<uint64_t>& p, const std::string& what) {
  const uint64_t o = p[image::kTcpOptions];
  if (o & image::kTcpOptReusePort)
    CKPT_TRY(set_int(sock, SOL_SOCKET, SO_REUSEPORT, 1, what, "SO_REUSEPORT"));
  if (o & image::kTcpOptNoDelay)
    CKPT_TRY(set_int(sock, IPPROTO_TCP, TCP_NODELAY, 1, what, "TCP_NODELAY"));
  if (o & image::kTcpOptCork) CKPT_TRY(set_int(sock, IPPROTO_TCP, TCP_CORK, 1, what, "TCP_CORK"));
  if (o & image::kTcpOptKeepAlive)
    CKPT_TRY(set_int(sock, SOL_SOCKET, SO_KEEPALIVE, 1, what, "SO_KEEPALIVE"));
  CKPT_TRY(
      set_int(sock, IPPROTO_TCP, TCP_KEEPIDLE, int(p[image::kTcpKeepIdle]), what, "TCP_KEEPIDLE"));
  CKPT_TRY(set_int(sock, IPPROTO_TCP, TCP_KEEPINTVL, int(p[image::kTcpKeepIntvl]), what,
                   "TCP_KEEPINTVL"));
  CKPT_TRY(
      set_int(sock, IPPROTO_TCP, TCP_KEEPCNT, int(p[image::kTcpKeepCnt]), what, "TCP_KEEPCNT"));
  if (p[image::kTcpLinger]) {
    linger l{1, int(p[image::kTcpLinger] - 1)};
    if (::setsockopt(sock, SOL_SOCKET, SO_LINGER, &l, sizeof l) != 0)
      return sys_error(what + ": setting SO_LINGER");
  }
  return {};
}

Status bind_to(int sock, const Endpoint& e, const std::string& what) {
  sockaddr_storage sa;
  socklen_t len = sockaddr_of(e, &sa);
  if (::bind(sock, reinterpret_cast<sockaddr*>(&sa), len) != 0)
    return sys_error(what + ": binding " + describe(e));
  return {};
}

Status set_queue(int sock, int queue, uint32_t seq, const std::string& what) {
  if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR_QUEUE, &queue, sizeof queue) != 0 ||
      ::setsockopt(sock, IPPROTO_TCP, TCP_QUEUE_SEQ, &seq, sizeof seq) != 0)
    return sys_error(what + ": setting a queue's sequence number");
  return {};
}

Status fill_queue(int sock, int queue, const uint8_t* data, size_t len, const std::string& what) {
  if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR_QUEUE, &queue, sizeof queue) != 0)
    return sys_error(what + ": selecting a queue");
  while (len > 0) {
    ssize_t n = ::send(sock, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return sys_error(what + (queue == TCP_RECV_QUEUE ? ": refilling its receive queue"
                                                       : ": refilling its send queue"));
    data += n;
    len -= size_t(n);
  }
  return {};
}

Status rebuild_connection(int sock, const FileRecord& f, const Endpoint& local,
                          const std::string& what) {
  const auto& p = f.params;
  const uint64_t rq = p[image::kTcpRecvQueue], sq = p[image::kTcpSendQueue];
  if (rq + sq != f.data.size())
    return make_error(EBADMSG, what + ": TCP record's queues do not match its data");
  CKPT_TRY(repair(sock, 1, what));
  CKPT_TRY(set_queue(sock, TCP_SEND_QUEUE, uint32_t(p[image::kTcpSendSeq] - sq), what));
  CKPT_TRY(set_queue(sock, TCP_RECV_QUEUE, uint32_t(p[image::kTcpRecvSeq] - rq), what));
  const bool outside = is_outside(f);
  if (outside) {
    // Its packets pass the lock the checkpoint left (tcp_lock.hpp).
    CKPT_TRY(set_int(sock, SOL_SOCKET, SO_MARK, int(kRestoreMark), what, "SO_MARK"));
    sockaddr_storage sa;
    socklen_t len = sockaddr_of(local, &sa);
    if (::bind(sock, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
      if (errno != EADDRNOTAVAIL) return sys_error(what + ": binding " + describe(local));
      return make_error(EADDRNOTAVAIL, what + ": TCP connection " + describe(local) + " -> " +
                                           describe(load_endpoint(int(p[image::kTcpFamily]),
                                                                  &p[image::kTcpPeerPort])) +
                                           ": its local address does not exist on this node");
    }
  } else {
    CKPT_TRY(bind_to(sock, local, what));
  }
  const Endpoint peer = load_endpoint(int(p[image::kTcpFamily]), &p[image::kTcpPeerPort]);
  sockaddr_storage sa;
  socklen_t len = sockaddr_of(peer, &sa);
  if (::connect(sock, reinterpret_cast<sockaddr*>(&sa), len) != 0)
    return sys_error(what + ": reconnecting to " + describe(peer) + " in repair mode");

  const uint64_t o = p[image::kTcpOptions];
  tcp_repair_opt opts[4];
  unsigned n = 0;
  opts[n++] = {uint32_t(kTcpOptMss), uint32_t(p[image::kTcpMss])};
  if (o & image::kTcpOptWscale)
    opts[n++] = {uint32_t(kTcpOptWindow),
                 uint32_t(p[image::kTcpSndWscale] | (p[image::kTcpRcvWscale] << 16))};
  if (o & image::kTcpOptSack) opts[n++] = {uint32_t(kTcpOptSackPerm), 0};
  if (o & image::kTcpOptTimestamps) opts[n++] = {uint32_t(kTcpOptTimestamp), 0};
  if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR_OPTIONS, opts, n * sizeof opts[0]) != 0)
    return sys_error(what + ": restoring its negotiated options");
  if (o & image::kTcpOptTimestamps)
    CKPT_TRY(set_int(sock, IPPROTO_TCP, TCP_TIMESTAMP, int(uint32_t(p[image::kTcpTimestamp])), what,
                     "its timestamp clock"));
  // The queues first: the window is checked against rcv_nxt, which the
  // receive queue moves to where it was.
  CKPT_TRY(fill_queue(sock, TCP_RECV_QUEUE, f.data.data(), rq, what));
  // Sent and unsent data alike go back as sent and unacknowledged: the
  // retransmission timer delivers them after the restore.
  CKPT_TRY(fill_queue(sock, TCP_SEND_QUEUE, f.data.data() + rq, sq, what));
  tcp_repair_window w{};
  w.snd_wl1 = uint32_t(p[image::kTcpWindow]);
  w.snd_wnd = uint32_t(p[image::kTcpWindow + 1]);
  w.max_window = uint32_t(p[image::kTcpWindow + 2]);
  w.rcv_wnd = uint32_t(p[image::kTcpWindow + 3]);
  w.rcv_wup = uint32_t(p[image::kTcpWindow + 4]);
  if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR_WINDOW, &w, sizeof w) != 0)
    return sys_error(what + ": restoring its window");
  return {};
}

// Whether a leftover of a killed incarnation is on `port` (time_wait.hpp).
// Other sockets may share the port without being in the way (an IPv6-only
// listener beside an IPv4 one, as Open MPI makes), so they do not count.
bool leftover_on(uint16_t port) {
  for (const TcpRow& r : tcp_rows("/proc/net/"))
    if (r.local.port == port && is_leftover(r.state, r.inode)) return true;
  return false;
}

// What else holds `port`, for the error: the socket in the way says why.
std::string holders_of(uint16_t port) {
  std::string out;
  for (const TcpRow& r : tcp_rows("/proc/net/")) {
    if (r.local.port != port) continue;
    out += out.empty() ? " (held by " : ", ";
    out += std::string(tcp_state_name(r.state)) + " " + describe(r.local) + "->" +
           describe(r.remote) + (r.inode ? "" : " of no process");
  }
  return out.empty() ? out : out + ")";
}

// listen(2) checks the port again, outside repair mode: a connection of the
// old incarnation that the kill left in TIME-WAIT, made by a program that
// did not set SO_REUSEADDR, holds it for up to a minute. Those are ended
// (SOCK_DESTROY); on a kernel that cannot, waited out (saying so once).
// Closing connections no process holds (across nodes, a FIN or its answer
// may still be on its way) are waited for: the kernel does not destroy
// those, and they end within a round trip or a retransmission.
// Anything else in the way is an error.
Status listen_again(int sock, const Endpoint& local, int backlog, const std::string& what,
                    const LogFn* log) {
  bool said = false, can_destroy = true;
  for (int tries = 0;; ++tries) {
    if (::listen(sock, backlog) == 0) return {};
    if (errno != EADDRINUSE || tries >= 700 || !leftover_on(local.port))
      return sys_error(what + ": listening on " + describe(local) + holders_of(local.port));
    if (can_destroy && destroy_time_wait(local.port) >= 0) {
      ::usleep(10 * 1000);
      continue;
    }
    can_destroy = false;
    if (!said && log && *log)
      (*log)(LogKind::note, what + ": waiting for the TIME-WAIT of old connections (at most 60 s)");
    said = true;
    ::usleep(100 * 1000);
  }
}

}  // namespace

Result<UniqueFd> restore_tcp(const FileRecord& f, const std::string& what,
                             std::vector<Repaired>* repaired, const LogFn* log) {
  const auto& p = f.params;
  if (p.size() < image::kTcpParams) return make_error(EBADMSG, what + ": TCP record is malformed");
  const int family = int(p[image::kTcpFamily]);
  if (family != AF_INET && family != AF_INET6)
    return make_error(EBADMSG, what + ": TCP record has an unknown address family");
  UniqueFd sock(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP));
  if (!sock.valid()) return sys_error(what + ": creating the socket");
  const int s = sock.get();
  if (family == AF_INET6)
    CKPT_TRY(set_int(s, IPPROTO_IPV6, IPV6_V6ONLY,
                     (p[image::kTcpOptions] & image::kTcpOptV6Only) ? 1 : 0, what, "IPV6_V6ONLY"));
  CKPT_TRY(set_options(s, p, what));
  const Endpoint local = load_endpoint(family, &p[image::kTcpLocalPort]);
  const bool reuse = p[image::kTcpOptions] & image::kTcpOptReuseAddr;
  const uint64_t state = p[image::kTcpState];
  if (state == TCP_ESTABLISHED) {
    CKPT_TRY(rebuild_connection(s, f, local, what));
    repaired->push_back({s, reuse, is_outside(f), is_outside(f) ? connection_of(f) : Connection{}});
  } else if (state == TCP_LISTEN || state == TCP_CLOSE) {
    const bool bound = local.port != 0;
    if (bound) {
      CKPT_TRY(repair(s, 1, what));
      CKPT_TRY(bind_to(s, local, what));
      CKPT_TRY(repair(s, kRepairOffNoProbe, what));
    }
    // The job's connections on this port (accepted from this listener, or
    // sharing its port) may already exist, bound in repair mode, whatever
    // the order of the descriptors: listen(2) checks the port again and
    // lets them stand only if this socket allows reuse. So it does while it
    // starts listening, then takes the program's own setting back.
    const bool reuse_for_listen = state == TCP_LISTEN && bound;
    if (reuse || reuse_for_listen)
      CKPT_TRY(set_int(s, SOL_SOCKET, SO_REUSEADDR, 1, what, "SO_REUSEADDR"));
    if (state == TCP_LISTEN)
      CKPT_TRY(listen_again(s, local, int(p[image::kTcpBacklog]), what, log));
    if (reuse_for_listen && !reuse)
      CKPT_TRY(set_int(s, SOL_SOCKET, SO_REUSEADDR, 0, what, "SO_REUSEADDR"));
  } else {
    return make_error(EBADMSG, what + ": TCP record has an unsupported state");
  }
  if ((f.flags & O_NONBLOCK) && ::fcntl(s, F_SETFL, O_NONBLOCK) != 0)
    return sys_error(what + ": setting O_NONBLOCK");
  return sock;
}

Status finish_tcp(const std::vector<Repaired>& repaired, std::vector<Held>* hold) {
  for (const Repaired& r : repaired) {
    if (hold && r.outside) {
      UniqueFd copy(::fcntl(r.fd, F_DUPFD_CLOEXEC, 3));
      if (!copy.valid()) return sys_error("TCP connection: keeping a copy");
      Repaired kept = r;
      kept.fd = copy.get();
      hold->push_back({std::move(copy), kept});
      continue;
    }
    CKPT_TRY(repair(r.fd, 0, "TCP connection"));
    if (r.outside) {
      // Its window probe went out marked; now its peer's packets may find it.
      CKPT_TRY(unlock_connection(r.conn));
      CKPT_TRY(set_int(r.fd, SOL_SOCKET, SO_MARK, 0, "TCP connection", "SO_MARK"));
    }
    if (r.reuse_addr)
      CKPT_TRY(set_int(r.fd, SOL_SOCKET, SO_REUSEADDR, 1, "TCP connection", "SO_REUSEADDR"));
  }
  return {};
}

Status finish_held(std::vector<Held>* held) {
  std::vector<Repaired> rs;
  for (const Held& h : *held) rs.push_back(h.r);
  Status s = finish_tcp(rs);
  held->clear();
  return s;
}

}  // namespace ckpt::sockets
