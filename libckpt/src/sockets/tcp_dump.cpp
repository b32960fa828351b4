// Saving a TCP socket of a frozen process (tcp.hpp). Everything is read
// through the tool's own copy of the socket; a connection is put in repair
// mode only to peek at its queues and taken out without a window probe, so a
// process that keeps running (leave-running checkpoints) sees nothing.
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "proc/fd_links.hpp"
#include "sockets/address.hpp"
#include "sockets/peek.hpp"
#include "sockets/tcp.hpp"
#include "util/text.hpp"

namespace ckpt::sockets {

using image::FileRecord;

namespace {

template <typename T>
Status get_opt(int sock, int level, int name, T* v, const std::string& what, const char* opt) {
  socklen_t len = sizeof *v;
  if (::getsockopt(sock, level, name, v, &len) != 0) return sys_error(what + ": reading " + opt);
  return {};
}

// The queue's sequence number and content (peeked: nothing is consumed).
Status peek_queue(int sock, int queue, size_t len, uint64_t* seq, std::vector<uint8_t>* data,
                  const std::string& what) {
  const char* name = queue == TCP_RECV_QUEUE ? "receive queue" : "send queue";
  if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR_QUEUE, &queue, sizeof queue) != 0)
    return sys_error(what + ": selecting the " + name);
  uint32_t s = 0;
  CKPT_TRY(get_opt(sock, IPPROTO_TCP, TCP_QUEUE_SEQ, &s, what, "the queue's sequence number"));
  *seq = s;
  size_t at = data->size();
  data->resize(at + len);
  while (len > 0) {
    // A peek always starts at the head: read the whole queue in one call.
    ssize_t n = ::recv(sock, data->data() + at, len, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_error(what + ": reading the " + name);
    if (size_t(n) != len)
      return make_error(EAGAIN, what + ": the " + name + " changed while it was read");
    break;
  }
  return {};
}

// The queues, sequence numbers and window of one connection, read as one
// snapshot. The process is frozen and its packets held back, but the
// kernel still takes in the peer's segments (new data moves rcv_nxt and,
// with the acknowledgement it tries to send, rcv_wup) and its
// acknowledgements (snd_una): a segment arriving between two of the reads
// would give a receive queue that does not end at the saved rcv_nxt, or a
// window whose rcv_wup lies beyond it (the restore's TCP_REPAIR_WINDOW then
// fails with EINVAL: seen in nodes_failure.sh's moves). So the reads are
// repeated until rcv_nxt and the send queue's length are the same before
// and after them: nothing arrived in between. The peer stops sending new
// data soon (nothing acknowledges it), so this ends within a few rounds.
Status read_snapshot(int sock, const std::string& what, FileRecord* f, int* inq, int* outq,
                     int* unsent, tcp_repair_window* w, uint32_t* ts) {
  auto& p = f->params;
  const size_t data_at = f->data.size();
  for (int attempt = 0;; ++attempt) {
    f->data.resize(data_at);
    int recv_q = TCP_RECV_QUEUE;
    uint32_t before = 0, after = 0;
    if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR_QUEUE, &recv_q, sizeof recv_q) != 0)
      return sys_error(what + ": selecting the receive queue");
    CKPT_TRY(get_opt(sock, IPPROTO_TCP, TCP_QUEUE_SEQ, &before, what, "rcv_nxt"));
    if (::ioctl(sock, SIOCINQ, inq) != 0 || ::ioctl(sock, SIOCOUTQ, outq) != 0 ||
        ::ioctl(sock, SIOCOUTQNSD, unsent) != 0)
      return sys_error(what + ": measuring its queues");
    Status s =
        peek_queue(sock, TCP_RECV_QUEUE, size_t(*inq), &p[image::kTcpRecvSeq], &f->data, what);
    if (s.ok())
      s = peek_queue(sock, TCP_SEND_QUEUE, size_t(*outq), &p[image::kTcpSendSeq], &f->data, what);
    if (s.ok()) s = get_opt(sock, IPPROTO_TCP, TCP_REPAIR_WINDOW, w, what, "its window");
    if (s.ok()) s = get_opt(sock, IPPROTO_TCP, TCP_TIMESTAMP, ts, what, "its timestamp");
    int outq_after = 0;
    if (s.ok() && ::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR_QUEUE, &recv_q, sizeof recv_q) != 0)
      s = sys_error(what + ": selecting the receive queue");
    if (s.ok()) s = get_opt(sock, IPPROTO_TCP, TCP_QUEUE_SEQ, &after, what, "rcv_nxt");
    if (s.ok() && ::ioctl(sock, SIOCOUTQ, &outq_after) != 0)
      s = sys_error(what + ": measuring its send queue");
    const bool moved = !s.ok() || before != after || *outq != outq_after;
    if (!moved) return {};
    // A queue that changed while it was peeked reads short (EAGAIN): the
    // same cause, the same remedy. Other errors are final.
    if (!s.ok() && s.error().code != EAGAIN) return s;
    if (attempt == 100)
      return s.ok() ? make_error(EAGAIN, what + ": its queues kept changing while it was read") : s;
    ::usleep(1000);
  }
}

Status read_connection(int sock, const std::string& what, FileRecord* f) {
  auto& p = f->params;
  int inq = 0, outq = 0, unsent = 0;
  // Leaving repair mode clears SO_REUSEADDR: it is set again after, or the
  // program's next bind of this port (after it closes) would fail.
  const bool reuse = sockopt_int(sock, SOL_SOCKET, SO_REUSEADDR);
  int on = 1;
  if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR, &on, sizeof on) != 0) {
    if (errno == EPERM)
      return make_error(EPERM, what + ": saving a TCP connection needs CAP_NET_ADMIN (TCP_REPAIR)");
    return sys_error(what + ": entering repair mode");
  }
  tcp_repair_window w{};
  uint32_t ts = 0;
  Status s = read_snapshot(sock, what, f, &inq, &outq, &unsent, &w, &ts);
  int off = kRepairOffNoProbe;
  if (::setsockopt(sock, IPPROTO_TCP, TCP_REPAIR, &off, sizeof off) != 0 && s.ok())
    s = sys_error(what + ": leaving repair mode");
  if (reuse && ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 && s.ok())
    s = sys_error(what + ": setting SO_REUSEADDR again");
  if (!s.ok()) return s;
  p[image::kTcpRecvQueue] = uint64_t(inq);
  p[image::kTcpSendQueue] = uint64_t(outq);
  p[image::kTcpSendUnsent] = uint64_t(unsent);
  p[image::kTcpTimestamp] = ts;
  const uint32_t win[5] = {w.snd_wl1, w.snd_wnd, w.max_window, w.rcv_wnd, w.rcv_wup};
  for (int i = 0; i < 5; ++i) p[image::kTcpWindow + i] = win[i];

  int mss = 0;
  CKPT_TRY(get_opt(sock, IPPROTO_TCP, TCP_MAXSEG, &mss, what, "its MSS"));
  p[image::kTcpMss] = uint64_t(mss);
  tcp_info ti{};
  CKPT_TRY(get_opt(sock, IPPROTO_TCP, TCP_INFO, &ti, what, "TCP_INFO"));
  if (ti.tcpi_options & TCPI_OPT_TIMESTAMPS) p[image::kTcpOptions] |= image::kTcpOptTimestamps;
  if (ti.tcpi_options & TCPI_OPT_SACK) p[image::kTcpOptions] |= image::kTcpOptSack;
  if (ti.tcpi_options & TCPI_OPT_WSCALE) {
    p[image::kTcpOptions] |= image::kTcpOptWscale;
    p[image::kTcpSndWscale] = ti.tcpi_snd_wscale;
    p[image::kTcpRcvWscale] = ti.tcpi_rcv_wscale;
  }
  return {};
}

}  // namespace

std::set<uint64_t> job_socket_inodes(const std::vector<pid_t>& job) {
  std::set<uint64_t> out;
  for (pid_t pid : job)
    for (const proc::FdLink& l : proc::fd_links(pid)) {
      unsigned long long ino;
      if (std::sscanf(l.target.c_str(), "socket:[%llu]", &ino) == 1) out.insert(ino);
    }
  return out;
}

Status collect_tcp(pid_t pid, int sock, const std::set<uint64_t>& job_sockets, bool allow_outside,
                   const std::string& what, FileRecord* f) {
  f->kind = image::FileKind::kTcp;
  f->params.assign(image::kTcpParams, 0);
  auto& p = f->params;
  sockaddr_storage local{}, peer{};
  socklen_t len = sizeof local;
  if (::getsockname(sock, reinterpret_cast<sockaddr*>(&local), &len) != 0)
    return sys_error(what + ": reading its address");
  Endpoint me = endpoint_of(local), them;
  p[image::kTcpFamily] = local.ss_family;
  store_endpoint(me, &p[image::kTcpLocalPort]);

  tcp_info ti{};
  CKPT_TRY(get_opt(sock, IPPROTO_TCP, TCP_INFO, &ti, what, "TCP_INFO"));
  const unsigned state = ti.tcpi_state;
  p[image::kTcpState] = state;
  const std::string name = "TCP socket " + describe(me);
  if (state == TCP_LISTEN) {
    if (ti.tcpi_unacked > 0)  // for a listener: connections not yet accepted
      return make_error(ENOTSUP, what + " (" + name + "): " + std::to_string(ti.tcpi_unacked) +
                                     " connection(s) not yet accepted: not supported yet");
    p[image::kTcpBacklog] = ti.tcpi_sacked;  // for a listener: its backlog
  } else if (state == TCP_ESTABLISHED) {
    len = sizeof peer;
    if (::getpeername(sock, reinterpret_cast<sockaddr*>(&peer), &len) != 0)
      return sys_error(what + ": reading its peer's address");
    them = endpoint_of(peer);
    store_endpoint(them, &p[image::kTcpPeerPort]);
    bool inside = false;
    for (const TcpRow& r : tcp_rows(proc_path(pid, "net/")))
      if (r.local == them && r.remote == me && job_sockets.count(r.inode) > 0) inside = true;
    if (!inside && !allow_outside)
      return make_error(ENOTSUP, what + " (TCP connection " + describe(me) + " -> " +
                                     describe(them) +
                                     "): its peer is not in the job: checkpoint the whole job "
                                     "(--tree of a common ancestor), or save it in repair mode "
                                     "with --tcp-established");
    if (!inside) p[image::kTcpOptions] |= image::kTcpOptOutside;
    CKPT_TRY(read_connection(
        sock, what + " (TCP connection " + describe(me) + " -> " + describe(them) + ")", f));
  } else if (state != TCP_CLOSE) {
    return make_error(ENOTSUP,
                      what + " (" + name + "): " + tcp_state_name(state) + ": not supported yet");
  }

  uint64_t& o = p[image::kTcpOptions];
  if (sockopt_int(sock, SOL_SOCKET, SO_REUSEADDR)) o |= image::kTcpOptReuseAddr;
  if (sockopt_int(sock, SOL_SOCKET, SO_REUSEPORT)) o |= image::kTcpOptReusePort;
  if (sockopt_int(sock, IPPROTO_TCP, TCP_NODELAY)) o |= image::kTcpOptNoDelay;
  if (sockopt_int(sock, IPPROTO_TCP, TCP_CORK)) o |= image::kTcpOptCork;
  if (local.ss_family == AF_INET6 && sockopt_int(sock, IPPROTO_IPV6, IPV6_V6ONLY))
    o |= image::kTcpOptV6Only;
  if (sockopt_int(sock, SOL_SOCKET, SO_KEEPALIVE)) o |= image::kTcpOptKeepAlive;
  int v = 0;
  CKPT_TRY(get_opt(sock, IPPROTO_TCP, TCP_KEEPIDLE, &v, what, "TCP_KEEPIDLE"));
  p[image::kTcpKeepIdle] = uint64_t(v);
  CKPT_TRY(get_opt(sock, IPPROTO_TCP, TCP_KEEPINTVL, &v, what, "TCP_KEEPINTVL"));
  p[image::kTcpKeepIntvl] = uint64_t(v);
  CKPT_TRY(get_opt(sock, IPPROTO_TCP, TCP_KEEPCNT, &v, what, "TCP_KEEPCNT"));
  p[image::kTcpKeepCnt] = uint64_t(v);
  linger l{};
  CKPT_TRY(get_opt(sock, SOL_SOCKET, SO_LINGER, &l, what, "SO_LINGER"));
  p[image::kTcpLinger] = l.l_onoff ? uint64_t(l.l_linger) + 1 : 0;
  f->path = state == TCP_ESTABLISHED
                ? "TCP " + describe(me) + " -> " + describe(them)
                : (state == TCP_LISTEN ? "TCP listening on " : "TCP ") + describe(me);
  return {};
}

}  // namespace ckpt::sockets
