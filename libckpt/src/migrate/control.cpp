#include "migrate/control.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ckpt::migrate {

bool CtlMessage::u64(uint64_t* v) const {
  if (data.size() != sizeof *v) return false;
  std::memcpy(v, data.data(), sizeof *v);
  return true;
}

Status ctl_send(int fd, Ctl kind, const void* data, size_t len, std::initializer_list<int> pass) {
  std::vector<uint8_t> m(1 + len);
  m[0] = uint8_t(kind);
  if (len) std::memcpy(m.data() + 1, data, len);
  iovec iov{m.data(), m.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(2 * sizeof(int))] = {};
  if (pass.size() > 0 && pass.size() <= 2) {
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(pass.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(pass.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), pass.begin(), pass.size() * sizeof(int));
  }
  if (::sendmsg(fd, &mh, MSG_NOSIGNAL) != ssize_t(m.size()))
    return sys_error("talking to the receiver's other process");
  return {};
}

Status ctl_send_u64(int fd, Ctl kind, uint64_t v) {
  return ctl_send(fd, kind, &v, sizeof v);
}

CtlMessage ctl_recv(int fd, std::vector<UniqueFd>* got) {
  char buf[32 << 10];  // a kRuns message holds at most kReportRuns runs
  static_assert(sizeof buf >= 1 + 8 + kReportRuns * 24, "a kRuns message fits");
  iovec iov{buf, sizeof buf};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(2 * sizeof(int))] = {};
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  ssize_t n;
  do n = ::recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); n > 0 && c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; ++i) {
      int passed;
      std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
      UniqueFd owned(passed);
      if (got) got->push_back(std::move(owned));
    }
  }
  if (n <= 0) return {};
  return {Ctl(buf[0]), std::string(buf + 1, size_t(n - 1))};
}

}  // namespace ckpt::migrate
