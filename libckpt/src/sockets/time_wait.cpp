// SOCK_DESTROY of TIME-WAIT sockets (time_wait.hpp), one netlink request
// per socket, naming it by its exact four-tuple. Only sockets that block the
// restored job's own port are touched; TIME-WAIT protects against late
// segments of a connection that the restore is about to recreate anyway.
#include "sockets/time_wait.hpp"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "sockets/address.hpp"
#include "sockets/sock_diag.hpp"
#include "util/fd.hpp"

namespace ckpt::sockets {

namespace {

// Sends one SOCK_DESTROY request and reads its acknowledgement: 0 or -errno.
int destroy_one(int nl, const TcpRow& r) {
  struct {
    nlmsghdr nh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nh.nlmsg_len = sizeof msg;
  msg.nh.nlmsg_type = SOCK_DESTROY;
  msg.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  msg.req.sdiag_family = uint8_t(r.local.family);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = 1u << r.state;
  msg.req.id.idiag_sport = htons(r.local.port);
  msg.req.id.idiag_dport = htons(r.remote.port);
  std::memcpy(msg.req.id.idiag_src, r.local.addr.data(), 16);
  std::memcpy(msg.req.id.idiag_dst, r.remote.addr.data(), 16);
  msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  alignas(nlmsghdr) char buf[512];
  const nlmsghdr* nh = sock_diag_ask(nl, &msg, sizeof msg, buf, sizeof buf);
  if (!nh) return -errno;
  if (nh->nlmsg_type != NLMSG_ERROR) return -EPROTO;
  return reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(nh))->error;  // 0 or -errno
}

}  // namespace

int destroy_time_wait(uint16_t port) {
  UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) return -errno;
  int destroyed = 0;
  for (const TcpRow& r : tcp_rows("/proc/net/")) {
    if (!is_leftover(r.state, r.inode) || r.local.port != port) continue;
    const int rc = destroy_one(nl.get(), r);
    if (rc == 0) {
      ++destroyed;
    } else if (rc != -ENOENT) {  // gone meanwhile is fine; anything else: cannot
      return rc;
    }
  }
  return destroyed;
}

bool is_leftover(unsigned state, uint64_t inode) {
  if (state == TCP_TIME_WAIT) return true;
  const bool closing = state == TCP_FIN_WAIT1 || state == TCP_FIN_WAIT2 || state == TCP_LAST_ACK ||
                       state == TCP_CLOSING || state == TCP_CLOSE_WAIT;
  return closing && inode == 0;
}

}  // namespace ckpt::sockets
