#include "channel.hpp"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "rng.hpp"
#include "sys.hpp"

namespace jobgen {

namespace {

const Job& job() {
  return *self.job;
}

std::string fifo_path(const Channel& c, int from) {
  return self.work + "/fifo." + std::to_string(c.id) + (from == 0 ? ".ab" : ".ba");
}

// A service's address: a path or an abstract name for UNIX, a port for TCP.
socklen_t service_addr(const Service& s, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof *ss);
  if (s.kind == Kind::kTcp4) {
    auto* in = reinterpret_cast<sockaddr_in*>(ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(s.port);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sizeof *in;
  }
  if (s.kind == Kind::kTcp6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(s.port);
    in6->sin6_addr = in6addr_loopback;
    return sizeof *in6;
  }
  auto* un = reinterpret_cast<sockaddr_un*>(ss);
  un->sun_family = AF_UNIX;
  std::string name = s.kind == Kind::kUnixNamed ? self.work + "/unix." + std::to_string(s.id)
                                                : "jobgen-" + self.tag + "-" + std::to_string(s.id);
  size_t off = s.kind == Kind::kUnixAbstract ? 1 : 0;  // abstract: a leading NUL
  std::memcpy(un->sun_path + off, name.data(), name.size());
  return socklen_t(offsetof(sockaddr_un, sun_path) + off + name.size() + (off ? 0 : 1));
}

int service_family(Kind k) {
  return k == Kind::kTcp4 ? AF_INET : k == Kind::kTcp6 ? AF_INET6 : AF_UNIX;
}

sockaddr_in udp_addr(uint16_t port) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return in;
}

// rd and wr are parked (out of the way of every placement number).
void place_side(const Side& s, int rd, int wr) {
  const bool one = wr == rd;
  if (one) {
    place(rd, s.rd, s.cloexec, s.nonblock);
  } else {
    place(rd, s.rd, s.cloexec, s.nonblock);
    place(wr, s.wr, s.cloexec, false);
  }
  if (s.dup >= 0 && ::dup2(s.wr, s.dup) != s.dup) die_errno("dup2 of a channel end");
}

void set_raw(int tty) {
  termios t;
  if (::tcgetattr(tty, &t) != 0) die_errno("tcgetattr");
  ::cfmakeraw(&t);
  t.c_cc[VMIN] = 1;
  t.c_cc[VTIME] = 0;
  if (::tcsetattr(tty, TCSANOW, &t) != 0) die_errno("tcsetattr");
}

void message(const Channel& c, int from, int step, std::vector<uint8_t>* out) {
  out->resize(c.msg);
  for (size_t i = 0; i < c.msg; i += 8) {
    uint64_t w = mix(job().seed, uint64_t(c.id) * 2 + uint64_t(from), uint64_t(step), i / 8);
    std::memcpy(out->data() + i, &w, std::min<size_t>(8, c.msg - i));
  }
}

std::string what(const Channel& c, int side) {
  return "c" + std::to_string(c.id) + " (" + kind_name(c.kind) + ") side " + (side ? "b" : "a");
}

}  // namespace

const Side& side_of(const Channel& c, int side) {
  return side == 0 ? c.sa : c.sb;
}

void side_fds(const Channel& c, int side, int out[3]) {
  const Side& s = side_of(c, side);
  out[0] = s.rd;
  out[1] = s.wr;
  out[2] = s.dup;
}

void make_inherited(const Channel& c) {
  int a_rd, a_wr, b_rd, b_wr;
  switch (c.kind) {
    case Kind::kPipe: {
      int ab[2], ba[2];
      if (::pipe(ab) != 0 || ::pipe(ba) != 0) die_errno("pipe");
      a_wr = ab[1], b_rd = ab[0], b_wr = ba[1], a_rd = ba[0];
      break;
    }
    case Kind::kEventfd: {
      int ab = ::eventfd(0, EFD_SEMAPHORE), ba = ::eventfd(0, EFD_SEMAPHORE);
      if (ab < 0 || ba < 0) die_errno("eventfd");
      // Both sides hold both counters: a writes ab and reads ba.
      a_wr = ab, a_rd = ba, b_rd = ::dup(ab), b_wr = ::dup(ba);
      break;
    }
    case Kind::kPty: {
      int m = ::posix_openpt(O_RDWR | O_NOCTTY);
      if (m < 0 || ::grantpt(m) != 0 || ::unlockpt(m) != 0) die_errno("posix_openpt");
      int s = ::open(::ptsname(m), O_RDWR | O_NOCTTY);
      if (s < 0) die_errno("opening a pty's slave");
      set_raw(s);
      a_rd = a_wr = m, b_rd = b_wr = s;
      break;
    }
    default: {
      int type = c.kind == Kind::kUnixStream  ? SOCK_STREAM
                 : c.kind == Kind::kUnixDgram ? SOCK_DGRAM
                                              : SOCK_SEQPACKET;
      int sv[2];
      if (::socketpair(AF_UNIX, type, 0, sv) != 0) die_errno("socketpair");
      a_rd = a_wr = sv[0], b_rd = b_wr = sv[1];
    }
  }
  // All four parked before any is placed: a number the kernel gave one end
  // may be where another end goes.
  const bool a_one = a_rd == a_wr, b_one = b_rd == b_wr;
  a_rd = park(a_rd);
  a_wr = a_one ? a_rd : park(a_wr);
  b_rd = park(b_rd);
  b_wr = b_one ? b_rd : park(b_wr);
  place_side(c.sa, a_rd, a_wr);
  place_side(c.sb, b_rd, b_wr);
}

void setup_passive(int me) {
  for (const Service& s : job().services) {
    if (s.owner != me) continue;
    int type = s.seqpacket ? SOCK_SEQPACKET : SOCK_STREAM;
    int fd = ::socket(service_family(s.kind), type, 0);
    if (fd < 0) die_errno("socket for a listener");
    int one = 1;
    if (s.reuse && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
      die_errno("SO_REUSEADDR");
    if (s.kind == Kind::kTcp6 && ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0)
      die_errno("IPV6_V6ONLY");
    sockaddr_storage ss;
    socklen_t len = service_addr(s, &ss);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0)
      die_errno("binding listener s" + std::to_string(s.id));
    if (::listen(fd, 64) != 0) die_errno("listen");
    place(park(fd), s.fd);
  }
  for (const Channel& c : job().channels) {
    for (int side = 0; side < 2; ++side) {
      if ((side == 0 ? c.a : c.b) != me) continue;
      if (c.kind == Kind::kFifo) {
        int rd = ::open(fifo_path(c, 1 - side).c_str(), O_RDONLY | O_NONBLOCK);
        if (rd < 0) die_errno("opening a FIFO's read end");
        const Side& s = side_of(c, side);
        place(park(rd), s.rd, s.cloexec, false);
        if (!s.nonblock) set_nonblock(s.rd, false);
      } else if (c.kind == Kind::kUdp) {
        int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
        if (fd < 0) die_errno("udp socket");
        sockaddr_in in = udp_addr(side == 0 ? c.port_a : c.port_b);
        if (::bind(fd, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0) die_errno("binding udp");
        if (c.udp_connected) {
          sockaddr_in peer = udp_addr(side == 0 ? c.port_b : c.port_a);
          if (::connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof peer) != 0)
            die_errno("connecting udp");
        }
        const Side& s = side_of(c, side);
        place(park(fd), s.rd, s.cloexec, s.nonblock);
        if (s.dup >= 0 && ::dup2(s.wr, s.dup) != s.dup) die_errno("dup2");
      }
    }
  }
}

void setup_active(int me) {
  for (const Channel& c : job().channels) {
    if (c.kind == Kind::kFifo) {
      for (int side = 0; side < 2; ++side) {
        if ((side == 0 ? c.a : c.b) != me) continue;
        int wr;
        while ((wr = ::open(fifo_path(c, side).c_str(), O_WRONLY | O_NONBLOCK)) < 0) {
          if (errno != ENXIO) die_errno("opening a FIFO's write end");
          sleep_us(2000);
        }
        const Side& s = side_of(c, side);
        place(park(wr), s.wr, s.cloexec, false);
        set_nonblock(s.wr, false);
        if (s.dup >= 0 && ::dup2(s.wr, s.dup) != s.dup) die_errno("dup2");
      }
    }
    if (c.b != me || c.service < 0) continue;
    const Service& svc = job().services[c.service];
    int fd = ::socket(service_family(c.kind), svc.seqpacket ? SOCK_SEQPACKET : SOCK_STREAM, 0);
    if (fd < 0) die_errno("socket");
    if (c.port_b) {
      sockaddr_storage own{};
      socklen_t len;
      if (c.kind == Kind::kTcp4) {
        auto* in = reinterpret_cast<sockaddr_in*>(&own);
        *in = udp_addr(c.port_b);
        len = sizeof *in;
      } else {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&own);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(c.port_b);
        in6->sin6_addr = in6addr_loopback;
        len = sizeof *in6;
      }
      if (::bind(fd, reinterpret_cast<sockaddr*>(&own), len) != 0) die_errno("binding a client");
    }
    sockaddr_storage ss;
    socklen_t len = service_addr(svc, &ss);
    while (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      if (errno != ECONNREFUSED && errno != ENOENT && errno != EINTR)
        die_errno("connecting c" + std::to_string(c.id));
      sleep_us(2000);
    }
    uint32_t hello = uint32_t(c.id);
    write_all(fd, &hello, sizeof hello, "a hello");
    const Side& s = c.sb;
    place(park(fd), s.rd, s.cloexec, s.nonblock);
    if (s.dup >= 0 && ::dup2(s.wr, s.dup) != s.dup) die_errno("dup2");
  }
}

void setup_accept(int me) {
  for (const Service& s : job().services) {
    if (s.owner != me) continue;
    for (size_t i = 0; i < s.channels.size(); ++i) {
      int fd;
      while ((fd = ::accept(s.fd, nullptr, nullptr)) < 0)
        if (errno != EINTR) die_errno("accept on s" + std::to_string(s.id));
      uint32_t hello;
      read_all(fd, &hello, sizeof hello, "a hello");
      if (hello >= job().channels.size() || job().channels[hello].service != s.id)
        die("s" + std::to_string(s.id) + " accepted a connection for c" + std::to_string(hello));
      const Channel& c = job().channels[hello];
      place(park(fd), c.sa.rd, c.sa.cloexec, c.sa.nonblock);
      if (c.sa.dup >= 0 && ::dup2(c.sa.wr, c.sa.dup) != c.sa.dup) die_errno("dup2");
    }
    if (!s.keep) ::close(s.fd);
  }
}

void send_step(const Channel& c, int side, int step) {
  const Side& s = side_of(c, side);
  const int fd = (s.dup >= 0 && (step & 1)) ? s.dup : s.wr;
  if (c.kind == Kind::kEventfd) {
    uint64_t one = 1;
    write_all(fd, &one, sizeof one, "an eventfd");
    return;
  }
  std::vector<uint8_t> m;
  message(c, side, step, &m);
  if (c.kind == Kind::kUdp && !c.udp_connected) {
    sockaddr_in peer = udp_addr(side == 0 ? c.port_b : c.port_a);
    while (::sendto(fd, m.data(), m.size(), 0, reinterpret_cast<sockaddr*>(&peer), sizeof peer) !=
           ssize_t(m.size())) {
      if (errno == EAGAIN)
        wait_fd(fd, POLLOUT);
      else if (errno != EINTR)
        die_errno("sendto on " + what(c, side));
    }
    return;
  }
  if (is_datagram(c.kind) || c.seqpacket) {
    while (::send(fd, m.data(), m.size(), 0) != ssize_t(m.size())) {
      if (errno == EAGAIN)
        wait_fd(fd, POLLOUT);
      else if (errno != EINTR)
        die_errno("send on " + what(c, side));
    }
    return;
  }
  write_all(fd, m.data(), m.size(), what(c, side).c_str());
}

void recv_step(const Channel& c, int side, int step) {
  const Side& s = side_of(c, side);
  const std::string w = what(c, side);
  if (c.kind == Kind::kEventfd) {
    uint64_t v = 0;
    read_all(s.rd, &v, sizeof v, w.c_str());
    if (v != 1) die(w + ": eventfd read " + std::to_string(v) + ", not 1");
    return;
  }
  std::vector<uint8_t> want, got(c.msg + 1);
  message(c, 1 - side, step, &want);
  if (is_datagram(c.kind) || c.seqpacket) {
    uint16_t from = 0;
    const bool check_from = c.kind == Kind::kUdp && !c.udp_connected;
    size_t n = recv_one(s.rd, got.data(), got.size(), w.c_str(), check_from ? &from : nullptr);
    if (n != c.msg)
      die(w + ": step " + std::to_string(step) + ": a datagram of " + std::to_string(n) +
          " bytes, not " + std::to_string(c.msg));
    if (check_from && from != (side == 0 ? c.port_b : c.port_a))
      die(w + ": a datagram from port " + std::to_string(from));
  } else {
    read_all(s.rd, got.data(), c.msg, w.c_str());
  }
  if (std::memcmp(got.data(), want.data(), c.msg) != 0)
    die(w + ": step " + std::to_string(step) + ": the message differs from what was sent");
}

}  // namespace jobgen
