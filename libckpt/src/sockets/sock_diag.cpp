// sock_diag requests (sock_diag.hpp).
#include "sockets/sock_diag.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace ckpt::sockets {

const nlmsghdr* sock_diag_ask(int nl, const void* req, size_t len, char* buf, size_t cap) {
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl, req, len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) !=
      ssize_t(len))
    return nullptr;
  ssize_t n = ::recv(nl, buf, cap, 0);
  if (n < 0) return nullptr;
  auto* h = reinterpret_cast<const nlmsghdr*>(buf);
  if (!NLMSG_OK(h, size_t(n)) ||
      (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr)))) {
    errno = EPROTO;
    return nullptr;
  }
  return h;
}

}  // namespace ckpt::sockets
