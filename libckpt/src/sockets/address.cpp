#include "sockets/address.hpp"

#include "util/fd.hpp"
#include "util/text.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstdio>
#include <cstring>

namespace ckpt::sockets {

namespace {

// The IPv4 address behind `e`, if it is one (plain or IPv4-mapped).
bool as_v4(const Endpoint& e, uint32_t* v4) {
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (e.family == AF_INET) {
    std::memcpy(v4, e.addr.data(), 4);
    return true;
  }
  if (std::memcmp(e.addr.data(), kMapped, 12) != 0) return false;
  std::memcpy(v4, e.addr.data() + 12, 4);
  return true;
}

}  // namespace

bool Endpoint::operator==(const Endpoint& o) const {
  if (port != o.port) return false;
  uint32_t a = 0, b = 0;
  bool va = as_v4(*this, &a), vb = as_v4(o, &b);
  if (va || vb) return va && vb && a == b;
  return addr == o.addr;
}

Endpoint endpoint_of(const sockaddr_storage& sa) {
  Endpoint e;
  e.family = sa.ss_family;
  if (sa.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&sa);
    std::memcpy(e.addr.data(), &in->sin_addr, 4);
    e.port = ntohs(in->sin_port);
  } else if (sa.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&sa);
    std::memcpy(e.addr.data(), &in6->sin6_addr, 16);
    e.port = ntohs(in6->sin6_port);
  }
  return e;
}

socklen_t sockaddr_of(const Endpoint& e, sockaddr_storage* out) {
  *out = {};
  if (e.family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    in->sin_family = AF_INET;
    in->sin_port = htons(e.port);
    std::memcpy(&in->sin_addr, e.addr.data(), 4);
    return sizeof *in;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(e.port);
  std::memcpy(&in6->sin6_addr, e.addr.data(), 16);
  return sizeof *in6;
}

bool parse_proc_endpoint(const char* text, Endpoint* out) {
  const char* colon = std::strchr(text, ':');
  if (!colon) return false;
  const size_t digits = size_t(colon - text);
  if (digits != 8 && digits != 32) return false;
  *out = {};
  out->family = digits == 8 ? AF_INET : AF_INET6;
  // Each 32-bit word is printed as the host-order value of its raw bytes.
  for (size_t w = 0; w < digits / 8; ++w) {
    unsigned v;
    if (std::sscanf(text + 8 * w, "%8x", &v) != 1) return false;
    uint32_t raw = v;
    std::memcpy(out->addr.data() + 4 * w, &raw, 4);
  }
  unsigned port;
  if (std::sscanf(colon + 1, "%x", &port) != 1) return false;
  out->port = uint16_t(port);
  return true;
}

std::string describe(const Endpoint& e) {
  char buf[INET6_ADDRSTRLEN] = "?";
  ::inet_ntop(e.family, e.addr.data(), buf, sizeof buf);
  return (e.family == AF_INET6 ? "[" + std::string(buf) + "]" : std::string(buf)) + ":" +
         std::to_string(e.port);
}

const char* tcp_state_name(unsigned st) {
  switch (st) {
    case TCP_ESTABLISHED:
      return "ESTABLISHED";
    case TCP_LISTEN:
      return "listening";
    case TCP_SYN_SENT:
      return "connecting (SYN-SENT)";
    case TCP_SYN_RECV:
      return "SYN-RECV";
    case TCP_FIN_WAIT1:
      return "closing (FIN-WAIT-1)";
    case TCP_FIN_WAIT2:
      return "half-closed (FIN-WAIT-2)";
    case TCP_TIME_WAIT:
      return "TIME-WAIT";
    case TCP_CLOSE_WAIT:
      return "half-closed by its peer (CLOSE-WAIT)";
    case TCP_LAST_ACK:
      return "closing (LAST-ACK)";
    case TCP_CLOSING:
      return "closing (CLOSING)";
    default:
      return "in an unknown state";
  }
}

void store_endpoint(const Endpoint& e, uint64_t* p) {
  p[0] = e.port;
  std::memcpy(&p[1], e.addr.data(), 8);
  std::memcpy(&p[2], e.addr.data() + 8, 8);
}

Endpoint load_endpoint(int family, const uint64_t* p) {
  Endpoint e;
  e.family = family;
  e.port = uint16_t(p[0]);
  std::memcpy(e.addr.data(), &p[1], 8);
  std::memcpy(e.addr.data() + 8, &p[2], 8);
  return e;
}

std::vector<TcpRow> tcp_rows(const std::string& dir) {
  std::vector<TcpRow> rows;
  for (const char* table : {"tcp", "tcp6"}) {
    auto text = read_file(dir + table);
    if (!text.ok()) continue;
    for_each_line(
        *text,
        [&](const std::string& line) {
          char local[64], remote[64];
          unsigned st;
          unsigned long long inode;
          TcpRow r;
          if (std::sscanf(line.c_str(), " %*s %63s %63s %x %*s %*s %*s %*s %*s %llu", local, remote,
                          &st, &inode) == 4 &&
              parse_proc_endpoint(local, &r.local) && parse_proc_endpoint(remote, &r.remote)) {
            r.state = st;
            r.inode = inode;
            rows.push_back(r);
          }
          return true;
        },
        1);
  }
  return rows;
}

}  // namespace ckpt::sockets
