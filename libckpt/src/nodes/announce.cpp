// Gratuitous ARP for a moved part's addresses (announce.hpp).
#include "nodes/announce.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace ckpt::nodes {

namespace {

// The interface holding IPv4 address `a` (network order) and its hardware
// address; false if none here or not Ethernet-like.
bool interface_of(uint32_t a, int* index, uint8_t mac[6]) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  std::string name;
  for (ifaddrs* i = list; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == a)
      name = i->ifa_name;
  bool found = false;
  for (ifaddrs* i = list; i && !name.empty(); i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_PACKET && name == i->ifa_name) {
      auto* ll = reinterpret_cast<sockaddr_ll*>(i->ifa_addr);
      if (ll->sll_hatype != ARPHRD_ETHER || ll->sll_halen != 6) break;
      std::memcpy(mac, ll->sll_addr, 6);
      *index = ll->sll_ifindex;
      found = true;
      break;
    }
  ::freeifaddrs(list);
  return found;
}

bool send_garp(uint32_t a, int index, const uint8_t mac[6]) {
  const int fd = ::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ARP));
  if (fd < 0) return false;
  // arphdr, then sender MAC, sender IP, target MAC (zero), target IP.
  uint8_t pkt[sizeof(arphdr) + 20] = {};
  arphdr h{};
  h.ar_hrd = htons(ARPHRD_ETHER);
  h.ar_pro = htons(ETH_P_IP);
  h.ar_hln = 6;
  h.ar_pln = 4;
  h.ar_op = htons(ARPOP_REQUEST);
  std::memcpy(pkt, &h, sizeof h);
  uint8_t* p = pkt + sizeof h;
  std::memcpy(p, mac, 6);
  std::memcpy(p + 6, &a, 4);
  std::memcpy(p + 16, &a, 4);
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_protocol = htons(ETH_P_ARP);
  to.sll_ifindex = index;
  to.sll_halen = 6;
  std::memset(to.sll_addr, 0xff, 6);
  const bool ok = ::sendto(fd, pkt, sizeof pkt, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) ==
                  ssize_t(sizeof pkt);
  ::close(fd);
  return ok;
}

}  // namespace

int announce_addresses(const std::vector<sockets::Connection>& conns) {
  std::vector<uint32_t> done;
  int sent = 0;
  for (const sockets::Connection& c : conns) {
    if (c.local.family != AF_INET) continue;  // IPv6 (unsolicited NA): not yet
    uint32_t a = 0;
    std::memcpy(&a, c.local.addr.data(), 4);
    bool seen = false;
    for (uint32_t d : done) seen = seen || d == a;
    if (seen) continue;
    done.push_back(a);
    int index = 0;
    uint8_t mac[6];
    if (interface_of(a, &index, mac) && send_garp(a, index, mac)) ++sent;
  }
  return sent;
}

}  // namespace ckpt::nodes
