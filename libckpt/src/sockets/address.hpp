// Internet socket addresses as the image stores them and /proc shows them.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ckpt::sockets {

struct Endpoint {
  int family = 0;                  // AF_INET or AF_INET6
  std::array<uint8_t, 16> addr{};  // in_addr (4 bytes, rest zero) or in6_addr
  uint16_t port = 0;               // host order

  // Equal as addresses: an IPv4-mapped IPv6 address equals its IPv4 form.
  bool operator==(const Endpoint& o) const;
};

Endpoint endpoint_of(const sockaddr_storage& sa);
// Back to a sockaddr of the endpoint's own family; returns its length.
socklen_t sockaddr_of(const Endpoint& e, sockaddr_storage* out);
// "0100007F:B59F" (IPv4) or 32 hex digits ":" port (IPv6), as in /proc/net/tcp.
bool parse_proc_endpoint(const char* text, Endpoint* out);
// "127.0.0.1:46495", "[::1]:22".
std::string describe(const Endpoint& e);
// "TIME-WAIT", "half-closed (FIN-WAIT-2)"...: a TCP_* state for messages.
const char* tcp_state_name(unsigned state);

// Image form: port, then the 16 address bytes as two words (image/model.hpp).
void store_endpoint(const Endpoint& e, uint64_t* port_then_addr);
Endpoint load_endpoint(int family, const uint64_t* port_then_addr);

// One row of /proc/net/tcp and /proc/net/tcp6 (`dir`: "/proc/net/" or
// "/proc/PID/net/", the netns of PID).
struct TcpRow {
  Endpoint local, remote;
  unsigned state;  // TCP_* (1 established, 6 TIME-WAIT, 10 listening...)
  uint64_t inode;
};
std::vector<TcpRow> tcp_rows(const std::string& dir);

}  // namespace ckpt::sockets
