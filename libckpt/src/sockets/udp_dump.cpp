// Saving a UDP socket of a frozen process (udp.hpp). Everything is read
// through the tool's own copy of the socket. The receive queue is peeked
// datagram by datagram from offset 0 (SO_PEEK_OFF), with IP_PKTINFO /
// IPV6_RECVPKTINFO on for the address each was sent to; both options are
// put back as the program had them, so a job that keeps running sees
// nothing.
#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>

#include "sockets/peek.hpp"
#include "sockets/udp.hpp"
#include "util/text.hpp"

namespace ckpt::sockets {

using image::FileRecord;

namespace {

constexpr size_t kMaxDatagram = 1u << 16;  // above any UDP payload without jumbograms
constexpr size_t kMaxDatagrams = 100000;

// Whether `sock` joined `group` on interface `ifindex`: MCAST_MSFILTER
// answers EADDRNOTAVAIL for a group the socket did not join.
bool member_of(int sock, int level, const sockaddr_storage& group, unsigned ifindex) {
  group_filter gf{};
  gf.gf_interface = ifindex;
  gf.gf_group = group;
  gf.gf_fmode = MCAST_EXCLUDE;
  socklen_t len = sizeof gf;
  return ::getsockopt(sock, level, MCAST_MSFILTER, &gf, &len) == 0;
}

// The first multicast group the socket is a member of ("" if none): the
// candidates are the groups /proc/PID/net/igmp and igmp6 list per device.
std::string multicast_membership(pid_t pid, int sock, int family) {
  std::string found;
  if (auto text = read_file(proc_path(pid, "net/igmp")); text.ok()) {
    unsigned idx = 0;
    for_each_line(*text, [&](const std::string& line) {
      unsigned v;
      unsigned group;
      if (!line.empty() && line[0] != '\t' && std::sscanf(line.c_str(), "%u", &v) == 1) {
        idx = v;
      } else if (idx && std::sscanf(line.c_str(), " %8X", &group) == 1) {
        sockaddr_storage g{};
        auto* in = reinterpret_cast<sockaddr_in*>(&g);
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = group;  // printed as the host-order value of the raw bytes
        if (member_of(sock, IPPROTO_IP, g, idx)) {
          char b[INET_ADDRSTRLEN];
          ::inet_ntop(AF_INET, &in->sin_addr, b, sizeof b);
          found = b;
          return false;
        }
      }
      return true;
    });
  }
  if (!found.empty() || family != AF_INET6) return found;
  if (auto text = read_file(proc_path(pid, "net/igmp6")); text.ok()) {
    for_each_line(*text, [&](const std::string& line) {
      unsigned idx;
      char hex[33];
      if (std::sscanf(line.c_str(), "%u %*s %32s", &idx, hex) != 2 || std::strlen(hex) != 32)
        return true;
      sockaddr_storage g{};
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&g);
      in6->sin6_family = AF_INET6;
      for (int i = 0; i < 16; ++i) {
        unsigned byte;
        std::sscanf(hex + 2 * i, "%2x", &byte);
        in6->sin6_addr.s6_addr[i] = uint8_t(byte);
      }
      if (!member_of(sock, IPPROTO_IPV6, g, idx)) return true;
      char b[INET6_ADDRSTRLEN];
      ::inet_ntop(AF_INET6, &in6->sin6_addr, b, sizeof b);
      found = b;
      return false;
    });
  }
  return found;
}

struct Peeked {
  Endpoint from, to;
  std::vector<uint8_t> data;
};

// The receive queue, datagram by datagram, without consuming it.
Status peek_queue(int sock, int family, const Endpoint& local, const std::string& what,
                  std::vector<Peeked>* out) {
  const int level = family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
  const int pktinfo = family == AF_INET6 ? IPV6_RECVPKTINFO : IP_PKTINFO;
  const int saved_info = sockopt_int(sock, level, pktinfo);
  int on = 1;
  CKPT_ASSIGN(const int saved_off, begin_peek(sock, what));
  if (::setsockopt(sock, level, pktinfo, &on, sizeof on) != 0)
    return end_peek(sock, saved_off, what, sys_error(what + ": setting IP_PKTINFO"));
  std::vector<uint8_t> buf(kMaxDatagram);
  Status s;
  for (;;) {
    sockaddr_storage from{};
    alignas(cmsghdr) char ctl[512];
    msghdr mh;
    ssize_t n = peek_message(sock, &buf, reinterpret_cast<sockaddr*>(&from), sizeof from, ctl,
                             sizeof ctl, 0, &mh);
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {
      s = sys_error(what + ": reading its receive queue");
      break;
    }
    if (mh.msg_flags & MSG_TRUNC) {
      s = make_error(EFBIG, what + ": a queued datagram larger than 64 KiB");
      break;
    }
    Peeked p;
    p.from = endpoint_of(from);
    p.to = local;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        in_pktinfo pi;
        std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
        p.to.addr = {};
        if (family == AF_INET) {
          std::memcpy(p.to.addr.data(), &pi.ipi_addr, 4);
        } else {  // an IPv4 datagram on an IPv6 socket: the mapped address
          p.to.addr[10] = p.to.addr[11] = 0xff;
          std::memcpy(p.to.addr.data() + 12, &pi.ipi_addr, 4);
        }
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
        in6_pktinfo pi;
        std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
        std::memcpy(p.to.addr.data(), &pi.ipi6_addr, 16);
      }
    }
    p.data.assign(buf.begin(), buf.begin() + n);
    out->push_back(std::move(p));
    if (out->size() > kMaxDatagrams) {
      s = make_error(EFBIG,
                     what + ": more than " + std::to_string(kMaxDatagrams) + " queued datagrams");
      break;
    }
  }
  if (::setsockopt(sock, level, pktinfo, &saved_info, sizeof saved_info) != 0 && s.ok())
    s = sys_error(what + ": restoring IP_PKTINFO");
  return end_peek(sock, saved_off, what, std::move(s));
}

}  // namespace

Status collect_udp(pid_t pid, int sock, const std::string& what, FileRecord* f) {
  f->kind = image::FileKind::kUdp;
  f->params.assign(image::kUdpParams, 0);
  auto& p = f->params;
  sockaddr_storage local{}, peer{};
  socklen_t len = sizeof local;
  if (::getsockname(sock, reinterpret_cast<sockaddr*>(&local), &len) != 0)
    return sys_error(what + ": reading its address");
  const int family = local.ss_family;
  const Endpoint me = endpoint_of(local);
  Endpoint them;
  len = sizeof peer;
  const bool connected = ::getpeername(sock, reinterpret_cast<sockaddr*>(&peer), &len) == 0;
  if (connected) them = endpoint_of(peer);
  p[image::kUdpFamily] = uint64_t(family);
  store_endpoint(me, &p[image::kUdpLocalPort]);
  if (connected) store_endpoint(them, &p[image::kUdpPeerPort]);
  const std::string desc =
      what + " (UDP socket " + describe(me) + (connected ? " -> " + describe(them) : "") + ")";

  const std::string group = multicast_membership(pid, sock, family);
  if (!group.empty())
    return make_error(ENOTSUP, desc + ": member of multicast group " + group + ": not supported");
  if (sockopt_int(sock, IPPROTO_UDP, UDP_CORK))
    return make_error(ENOTSUP, desc + ": corked (UDP_CORK): not supported");
  int outq = 0;
  if (::ioctl(sock, SIOCOUTQ, &outq) == 0 && outq > 0)
    return make_error(ENOTSUP, desc + ": " + std::to_string(outq) +
                                   " bytes being sent (MSG_MORE or a full device): not supported");

  const int level = family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
  uint64_t& o = p[image::kUdpOptions];
  if (sockopt_int(sock, SOL_SOCKET, SO_REUSEADDR)) o |= image::kUdpOptReuseAddr;
  if (sockopt_int(sock, SOL_SOCKET, SO_REUSEPORT)) o |= image::kUdpOptReusePort;
  if (sockopt_int(sock, SOL_SOCKET, SO_BROADCAST)) o |= image::kUdpOptBroadcast;
  if (family == AF_INET6 && sockopt_int(sock, IPPROTO_IPV6, IPV6_V6ONLY)) o |= image::kUdpOptV6Only;
  if (sockopt_int(sock, level, family == AF_INET6 ? IPV6_RECVPKTINFO : IP_PKTINFO))
    o |= image::kUdpOptPktInfo;
  if (sockopt_int(sock, level, family == AF_INET6 ? IPV6_RECVERR : IP_RECVERR))
    o |= image::kUdpOptRecvErr;
  p[image::kUdpSndBuf] = uint64_t(sockopt_int(sock, SOL_SOCKET, SO_SNDBUF));
  p[image::kUdpRcvBuf] = uint64_t(sockopt_int(sock, SOL_SOCKET, SO_RCVBUF));
  p[image::kUdpTos] = uint64_t(sockopt_int(sock, level, family == AF_INET6 ? IPV6_TCLASS : IP_TOS));
  p[image::kUdpTtl] =
      uint64_t(sockopt_int(sock, level, family == AF_INET6 ? IPV6_UNICAST_HOPS : IP_TTL));
  p[image::kUdpPeekOff] = uint64_t(int64_t(sockopt_int(sock, SOL_SOCKET, SO_PEEK_OFF)) + 1);
  for (auto [opt, param] : {std::pair{SO_RCVTIMEO, image::kUdpRcvTimeoUs},
                            std::pair{SO_SNDTIMEO, image::kUdpSndTimeoUs}}) {
    timeval tv{};
    socklen_t tl = sizeof tv;
    if (::getsockopt(sock, SOL_SOCKET, opt, &tv, &tl) == 0)
      p[param] = uint64_t(tv.tv_sec) * 1000000 + uint64_t(tv.tv_usec);
  }

  std::vector<Peeked> queue;
  CKPT_TRY(peek_queue(sock, family, me, desc, &queue));
  // An empty datagram that was peeked once (by the program, or by an
  // earlier checkpoint) is skipped by every later peek at an offset; when
  // that leaves nothing to see, the queue's memory still tells.
  uint32_t mem[SK_MEMINFO_VARS] = {};
  socklen_t ml = sizeof mem;
  if (queue.empty() && ::getsockopt(sock, SOL_SOCKET, SO_MEMINFO, mem, &ml) == 0 &&
      mem[SK_MEMINFO_RMEM_ALLOC] > 0)
    return make_error(ENOTSUP, desc +
                                   ": datagrams queued that a peek cannot show (an empty "
                                   "datagram read with MSG_PEEK before): not supported");
  for (const Peeked& d : queue) {
    const size_t at = p.size();
    p.resize(at + image::kUdpDgramWords, 0);
    p[at + image::kUdpDgramLen] = d.data.size();
    store_endpoint(d.from, &p[at + image::kUdpDgramFromPort]);
    uint64_t to[3];
    store_endpoint(d.to, to);
    p[at + image::kUdpDgramToAddr] = to[1];
    p[at + image::kUdpDgramToAddr + 1] = to[2];
    p[at + image::kUdpDgramFamily] = uint64_t(d.from.family);
    f->data.insert(f->data.end(), d.data.begin(), d.data.end());
  }
  f->path = "UDP " + describe(me) + (connected ? " -> " + describe(them) : "");
  return {};
}

}  // namespace ckpt::sockets
