// The connection lock of tcp_lock.hpp: one FIB rule per connection, added
// and removed over rtnetlink (what `ip rule add ... blackhole` sends).
#include "sockets/tcp_lock.hpp"

#include <linux/fib_rules.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "proc/fd_links.hpp"
#include "util/fd.hpp"

namespace ckpt::sockets {

namespace {

// The priority of the kernel's own "lookup local" rule: a peer on this node
// (a local address) is found in the local table, so the lock must come
// before that rule. Rules of one priority are tried in the order they were
// added, a new one after the others: the local rule is then added again
// after the locks and its older copy removed (local_rule_last), which keeps
// the lookup of every other packet as it was.
constexpr uint32_t kRulePriority = 0;

bool v4_mapped(const Endpoint& e) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return e.family == AF_INET6 && std::memcmp(e.addr.data(), prefix, 12) == 0;
}

// The address as the packets carry it: an IPv4-mapped IPv6 socket sends IPv4.
int wire_family(const Endpoint& e) {
  return v4_mapped(e) ? AF_INET : e.family;
}
const uint8_t* wire_addr(const Endpoint& e) {
  return v4_mapped(e) ? e.addr.data() + 12 : e.addr.data();
}

struct RuleMsg {
  alignas(nlmsghdr) char buf[256];
  size_t len = 0;
  nlmsghdr* nh() { return reinterpret_cast<nlmsghdr*>(buf); }
  void attr(uint16_t type, const void* data, size_t n) {
    auto* a = reinterpret_cast<rtattr*>(buf + NLMSG_ALIGN(len));
    a->rta_type = type;
    a->rta_len = uint16_t(RTA_LENGTH(n));
    std::memcpy(RTA_DATA(a), data, n);
    len = NLMSG_ALIGN(len) + RTA_ALIGN(a->rta_len);
  }
};

// Sends the request in `m` and reads the answer: 0 or -errno.
int send_rule(RuleMsg& m) {
  m.nh()->nlmsg_len = uint32_t(m.len);
  UniqueFd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!nl.valid()) return -errno;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), m.buf, m.len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return -errno;
  alignas(nlmsghdr) char reply[1024];
  ssize_t n = ::recv(nl.get(), reply, sizeof reply, 0);
  if (n < ssize_t(sizeof(nlmsghdr) + sizeof(nlmsgerr))) return n < 0 ? -errno : -EPROTO;
  const auto* rh = reinterpret_cast<const nlmsghdr*>(reply);
  if (rh->nlmsg_type != NLMSG_ERROR) return -EPROTO;
  return reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(rh))->error;
}

fib_rule_hdr* start(RuleMsg& m, uint16_t type, uint16_t flags, int family) {
  std::memset(m.buf, 0, sizeof m.buf);
  m.len = NLMSG_LENGTH(sizeof(fib_rule_hdr));
  m.nh()->nlmsg_type = type;
  m.nh()->nlmsg_flags = flags;
  auto* frh = reinterpret_cast<fib_rule_hdr*>(NLMSG_DATA(m.nh()));
  frh->family = uint8_t(family);
  return frh;
}

// "priority 0 lookup local", added (after every rule of priority 0) or
// removed (the first one).
int local_rule(int family, uint16_t type) {
  RuleMsg m{};
  fib_rule_hdr* frh =
      start(m, type, NLM_F_REQUEST | NLM_F_ACK | (type == RTM_NEWRULE ? NLM_F_CREATE : 0), family);
  frh->table = RT_TABLE_LOCAL;
  frh->action = FR_ACT_TO_TBL;
  const uint32_t prio = kRulePriority;
  m.attr(FRA_PRIORITY, &prio, 4);
  return send_rule(m);
}

// The rules of `family` in the order the kernel tries them: for each of
// priority 0, whether it is a local lookup (true) or a lock (false).
int rules_at_zero(int family, std::vector<bool>* local) {
  RuleMsg m{};
  start(m, RTM_GETRULE, NLM_F_REQUEST | NLM_F_DUMP, family);
  m.nh()->nlmsg_len = uint32_t(m.len);
  UniqueFd nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!nl.valid()) return -errno;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), m.buf, m.len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    return -errno;
  std::vector<char> reply(32768);  // new[]'s alignment is a netlink header's
  for (;;) {
    ssize_t n = ::recv(nl.get(), reply.data(), reply.size(), 0);
    if (n < 0) return -errno;
    for (auto* h = reinterpret_cast<nlmsghdr*>(reply.data()); NLMSG_OK(h, size_t(n));
         h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_DONE) return 0;
      if (h->nlmsg_type == NLMSG_ERROR) return reinterpret_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
      if (h->nlmsg_type != RTM_NEWRULE) continue;
      const auto* frh = reinterpret_cast<const fib_rule_hdr*>(NLMSG_DATA(h));
      uint32_t prio = 0, table = frh->table;
      int len = int(h->nlmsg_len) - int(NLMSG_LENGTH(sizeof *frh));
      for (auto* a = reinterpret_cast<const rtattr*>(reinterpret_cast<const char*>(frh) +
                                                     NLMSG_ALIGN(sizeof *frh));
           RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == FRA_PRIORITY) std::memcpy(&prio, RTA_DATA(a), 4);
        if (a->rta_type == FRA_TABLE) std::memcpy(&table, RTA_DATA(a), 4);
      }
      if (prio != kRulePriority) continue;
      if (frh->action == FR_ACT_BLACKHOLE) local->push_back(false);
      if (frh->action == FR_ACT_TO_TBL && table == RT_TABLE_LOCAL && !frh->src_len && !frh->dst_len)
        local->push_back(true);
    }
  }
}

// Moves every local lookup of priority 0 that comes before a lock to after
// them all: add a copy at the end, remove the first. There is a local rule
// at every step, so a tool killed in between leaves lookups as they were.
int local_rule_last(int family) {
  for (int round = 0; round < 16; ++round) {
    std::vector<bool> order;
    if (int rc = rules_at_zero(family, &order); rc != 0) return rc;
    size_t first_local = order.size(), last_lock = 0;
    bool any_lock = false;
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] && first_local == order.size()) first_local = i;
      if (!order[i]) last_lock = i, any_lock = true;
    }
    if (!any_lock || first_local == order.size() || first_local > last_lock) return 0;
    if (int rc = local_rule(family, RTM_NEWRULE); rc != 0 && rc != -EEXIST) return rc;
    if (int rc = local_rule(family, RTM_DELRULE); rc != 0) return rc;
  }
  return -ELOOP;
}

// Sends RTM_NEWRULE or RTM_DELRULE for `c` and reads the answer: 0 or -errno.
int rule(const Connection& c, uint16_t type) {
  const int family = wire_family(c.local);
  if (family != wire_family(c.peer)) return -EAFNOSUPPORT;
  const size_t alen = family == AF_INET ? 4 : 16;
  RuleMsg m{};
  fib_rule_hdr* frh = start(
      m, type, NLM_F_REQUEST | NLM_F_ACK | (type == RTM_NEWRULE ? NLM_F_CREATE | NLM_F_EXCL : 0),
      family);
  frh->src_len = uint8_t(alen * 8);
  frh->dst_len = uint8_t(alen * 8);
  frh->action = FR_ACT_BLACKHOLE;
  m.attr(FRA_SRC, wire_addr(c.local), alen);
  m.attr(FRA_DST, wire_addr(c.peer), alen);
  const uint8_t proto = IPPROTO_TCP;
  m.attr(FRA_IP_PROTO, &proto, 1);
  const fib_rule_port_range sport{c.local.port, c.local.port}, dport{c.peer.port, c.peer.port};
  m.attr(FRA_SPORT_RANGE, &sport, sizeof sport);
  m.attr(FRA_DPORT_RANGE, &dport, sizeof dport);
  const uint32_t mark = 0, mask = 0xffffffff, prio = kRulePriority;
  m.attr(FRA_FWMARK, &mark, 4);  // only packets without a mark
  m.attr(FRA_FWMASK, &mask, 4);
  m.attr(FRA_PRIORITY, &prio, 4);
  int rc = send_rule(m);
  if (type == RTM_NEWRULE && (rc == 0 || rc == -EEXIST)) {
    if (int moved = local_rule_last(family); moved != 0) return moved;
  }
  return rc;
}

std::string name(const Connection& c) {
  return "TCP connection " + describe(c.local) + " -> " + describe(c.peer);
}

}  // namespace

namespace {
LockObserver g_observer = nullptr;
}  // namespace

void set_lock_observer(LockObserver observer) {
  g_observer = observer;
}

Status lock_connection(const Connection& c) {
  // Journaled before the rule exists: a kill in between leaves an entry
  // whose removal finds no rule, never a rule without an entry.
  if (g_observer) g_observer(c, true);
  const int rc = rule(c, RTM_NEWRULE);
  if (rc == 0 || rc == -EEXIST) return {};
  (void)rule(c, RTM_DELRULE);  // added, but not before the local lookup
  if (rc == -EPERM)
    return make_error(EPERM, name(c) + ": locking it needs CAP_NET_ADMIN (a FIB rule)");
  return make_error(
      -rc, name(c) + ": adding the rule that holds its packets back: " + std::strerror(-rc));
}

Status unlock_connection(const Connection& c) {
  const int rc = rule(c, RTM_DELRULE);
  if (rc == 0 || rc == -ENOENT) {
    if (g_observer) g_observer(c, false);
    return {};
  }
  return make_error(
      -rc, name(c) + ": removing the rule that held its packets back: " + std::strerror(-rc));
}

std::vector<Connection> outside_connections(pid_t pid, const std::vector<uint64_t>& job_sockets) {
  std::vector<Connection> out;
  const auto rows = tcp_rows("/proc/" + std::to_string(pid) + "/net/");
  auto in_job = [&](uint64_t ino) {
    return ino != 0 && std::find(job_sockets.begin(), job_sockets.end(), ino) != job_sockets.end();
  };
  for (const TcpRow& r : rows) {
    if (r.state != TCP_ESTABLISHED || !in_job(r.inode)) continue;
    bool peer_in_job = false;
    for (const TcpRow& p : rows)
      if (p.local == r.remote && p.remote == r.local && in_job(p.inode)) peer_in_job = true;
    if (!peer_in_job) out.push_back({r.local, r.remote});
  }
  return out;
}

Status lock_all(const std::vector<Connection>& conns) {
  for (size_t i = 0; i < conns.size(); ++i)
    if (Status s = lock_connection(conns[i]); !s.ok()) {
      unlock_all(std::vector<Connection>(conns.begin(), conns.begin() + long(i)));
      return s;
    }
  return {};
}

void unlock_all(const std::vector<Connection>& conns) {
  for (const Connection& c : conns) (void)unlock_connection(c);
}

Status park_connection(pid_t pid, int fd) {
  auto taken = proc::take_fd(pid, fd);
  if (!taken.ok()) return taken.error().context("PID " + std::to_string(pid));
  const UniqueFd sock = std::move(*taken);
  int on = 1;
  if (::setsockopt(sock.get(), IPPROTO_TCP, TCP_REPAIR, &on, sizeof on) != 0)
    return sys_error("PID " + std::to_string(pid) + ": fd " + std::to_string(fd) +
                     ": entering repair mode");
  return {};
}

bool is_established(const image::FileRecord& f) {
  return f.kind == image::FileKind::kTcp && f.params.size() >= image::kTcpParams &&
         f.params[image::kTcpState] == TCP_ESTABLISHED;
}

bool is_outside(const image::FileRecord& f) {
  return f.kind == image::FileKind::kTcp && f.params.size() >= image::kTcpParams &&
         f.params[image::kTcpState] == TCP_ESTABLISHED &&
         (f.params[image::kTcpOptions] & image::kTcpOptOutside);
}

Connection connection_of(const image::FileRecord& f) {
  const int family = int(f.params[image::kTcpFamily]);
  return {load_endpoint(family, &f.params[image::kTcpLocalPort]),
          load_endpoint(family, &f.params[image::kTcpPeerPort])};
}

}  // namespace ckpt::sockets
