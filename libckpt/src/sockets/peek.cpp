// Peeking at a receive queue (peek.hpp).
#include "sockets/peek.hpp"

#include <cerrno>

namespace ckpt::sockets {

int sockopt_int(int sock, int level, int opt) {
  int v = 0;
  socklen_t len = sizeof v;
  if (::getsockopt(sock, level, opt, &v, &len) != 0) return 0;
  return v;
}

Result<int> begin_peek(int sock, const std::string& what) {
  const int saved = sockopt_int(sock, SOL_SOCKET, SO_PEEK_OFF);
  int off = 0;
  if (::setsockopt(sock, SOL_SOCKET, SO_PEEK_OFF, &off, sizeof off) != 0)
    return sys_error(what + ": setting SO_PEEK_OFF");
  return saved;
}

Status end_peek(int sock, int saved_off, const std::string& what, Status s) {
  if (::setsockopt(sock, SOL_SOCKET, SO_PEEK_OFF, &saved_off, sizeof saved_off) != 0 && s.ok())
    return sys_error(what + ": restoring SO_PEEK_OFF");
  return s;
}

ssize_t peek_message(int sock, std::vector<uint8_t>* buf, sockaddr* from, socklen_t from_len,
                     void* ctl, size_t ctl_len, int flags, msghdr* mh) {
  for (;;) {
    iovec iov{buf->data(), buf->size()};
    *mh = msghdr{};
    mh->msg_name = from;
    mh->msg_namelen = from_len;
    mh->msg_iov = &iov;
    mh->msg_iovlen = 1;
    mh->msg_control = ctl;
    mh->msg_controllen = ctl_len;
    ssize_t n = ::recvmsg(sock, mh, MSG_PEEK | MSG_DONTWAIT | flags);
    mh->msg_iov = nullptr;  // iov dies here
    mh->msg_iovlen = 0;
    if (n >= 0 || errno != EINTR) return n;
  }
}

}  // namespace ckpt::sockets
