// fd_udp READY: UDP sockets of one process across a checkpoint.
// Before ready:
//   R4  IPv4, bound to 127.0.0.1 (SO_REUSEADDR, SO_RCVBUF 96 KiB, O_NONBLOCK),
//       with datagrams queued from two senders: A (bound, kept open) and B
//       (bound, closed before ready: restore sends its datagrams from a
//       stand-in with its address), interleaved, of sizes 100, 1500, 2, 9000
//       and 1 (an empty datagram would be lost by the second checkpoint of a
//       chain: docs/jobs.md, "UDP");
//   R6  IPv6, bound to [::1] (IPV6_V6ONLY), two datagrams from an IPv6 sender
//       that was closed;
//   RD  IPv6 on [::] (dual stack, IPV6_RECVPKTINFO), a datagram from A
//       (IPv4, so its sender reads as ::ffff:127.0.0.1, and the address it
//       was sent to, 127.0.0.1, comes with it);
//   C   IPv4 connected to P (IP_TTL 7, IP_TOS 0x10); P bound, not connected;
//       two datagrams queued each way;
//   U   unbound, SO_BROADCAST.
// then waits ~3 s (the driver checkpoints, kills and restores meanwhile) and
// checks every queue (content, boundaries, sender addresses, pktinfo), the
// addresses and options of each socket, that C still takes datagrams only
// from P, and that all of them still send and receive.
// TEST_SABOTAGE=1: one datagram of R4 is read before ready (the check fails).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "e2e.h"

#define HOLD_MS 3000

static void fill(uint8_t* b, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(e2e_mix(((uint64_t)salt << 32) ^ i) >> 11);
}

static int udp(int family) {
  int s = socket(family, SOCK_DGRAM, 0);
  if (s < 0) e2e_fail("socket: %s", strerror(errno));
  return s;
}

static void bind4(int s, const char* addr) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  inet_pton(AF_INET, addr, &a.sin_addr);
  if (bind(s, (struct sockaddr*)&a, sizeof a) != 0) e2e_fail("bind %s: %s", addr, strerror(errno));
}
static void bind6(int s, const char* addr) {
  struct sockaddr_in6 a = {.sin6_family = AF_INET6};
  inet_pton(AF_INET6, addr, &a.sin6_addr);
  if (bind(s, (struct sockaddr*)&a, sizeof a) != 0) e2e_fail("bind %s: %s", addr, strerror(errno));
}

static struct sockaddr_storage name_of(int s) {
  struct sockaddr_storage a;
  socklen_t l = sizeof a;
  if (getsockname(s, (struct sockaddr*)&a, &l) != 0) e2e_fail("getsockname: %s", strerror(errno));
  return a;
}

static socklen_t len_of(const struct sockaddr_storage* a) {
  return a->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static void send_to(int s, size_t n, int salt, const struct sockaddr_storage* to) {
  uint8_t b[9000];
  fill(b, n, salt);
  if (sendto(s, b, n, 0, (const struct sockaddr*)to, len_of(to)) != (ssize_t)n)
    e2e_fail("sendto (salt %d): %s", salt, strerror(errno));
}

static int same(const struct sockaddr_storage* a, const struct sockaddr_storage* b) {
  if (a->ss_family != b->ss_family) return 0;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *x = (const void*)a, *y = (const void*)b;
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  const struct sockaddr_in6 *x = (const void*)a, *y = (const void*)b;
  return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

// The next datagram of `s` must be `n` bytes of pattern `salt` from `from`.
static void expect(int s, size_t n, int salt, const struct sockaddr_storage* from,
                   const char* what) {
  uint8_t b[16384], want[9000];
  struct sockaddr_storage f;
  socklen_t fl = sizeof f;
  ssize_t got = recvfrom(s, b, sizeof b, MSG_DONTWAIT, (struct sockaddr*)&f, &fl);
  if (got < 0) e2e_fail("%s: datagram %d missing: %s", what, salt, strerror(errno));
  if ((size_t)got != n) e2e_fail("%s: datagram %d has %zd bytes, expected %zu", what, salt, got, n);
  fill(want, n, salt);
  if (memcmp(b, want, n) != 0) e2e_fail("%s: datagram %d has other bytes", what, salt);
  if (from && !same(&f, from)) e2e_fail("%s: datagram %d is from another sender", what, salt);
}

static void expect_empty(int s, const char* what) {
  uint8_t b[16];
  if (recv(s, b, sizeof b, MSG_DONTWAIT) >= 0 || errno != EAGAIN)
    e2e_fail("%s: more datagrams than sent", what);
}

static int opt(int s, int level, int name) {
  int v = -1;
  socklen_t l = sizeof v;
  if (getsockopt(s, level, name, &v, &l) != 0) e2e_fail("getsockopt: %s", strerror(errno));
  return v;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  int one = 1, zero = 0;

  int r4 = udp(AF_INET);
  setsockopt(r4, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rcv = 96 * 1024;
  setsockopt(r4, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
  bind4(r4, "127.0.0.1");
  fcntl(r4, F_SETFL, O_NONBLOCK);
  int a = udp(AF_INET), b = udp(AF_INET);
  bind4(a, "127.0.0.1");
  bind4(b, "127.0.0.1");
  struct sockaddr_storage r4n = name_of(r4), an = name_of(a), bn = name_of(b);
  send_to(a, 100, 1, &r4n);
  send_to(b, 1500, 2, &r4n);
  send_to(a, 2, 3, &r4n);
  send_to(b, 9000, 4, &r4n);
  send_to(a, 1, 5, &r4n);
  close(b);  // gone: restore must send its datagrams from its address

  int r6 = udp(AF_INET6), s6 = udp(AF_INET6);
  setsockopt(r6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  bind6(r6, "::1");
  bind6(s6, "::1");
  struct sockaddr_storage r6n = name_of(r6), s6n = name_of(s6);
  send_to(s6, 700, 6, &r6n);
  send_to(s6, 3, 7, &r6n);
  close(s6);

  int rd = udp(AF_INET6);
  setsockopt(rd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  setsockopt(rd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one);
  bind6(rd, "::");
  struct sockaddr_storage rdn = name_of(rd), rd4 = {0};
  struct sockaddr_in* rd4in = (struct sockaddr_in*)&rd4;
  rd4in->sin_family = AF_INET;
  rd4in->sin_port = ((struct sockaddr_in6*)&rdn)->sin6_port;
  inet_pton(AF_INET, "127.0.0.1", &rd4in->sin_addr);
  send_to(a, 222, 8, &rd4);

  int c = udp(AF_INET), p = udp(AF_INET);
  bind4(c, "127.0.0.1");
  bind4(p, "127.0.0.1");
  struct sockaddr_storage cn = name_of(c), pn = name_of(p);
  if (connect(c, (struct sockaddr*)&pn, len_of(&pn)) != 0) e2e_fail("connect: %s", strerror(errno));
  int ttl = 7, tos = 0x10;
  setsockopt(c, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl);
  setsockopt(c, IPPROTO_IP, IP_TOS, &tos, sizeof tos);
  send_to(p, 300, 9, &cn);
  send_to(p, 301, 10, &cn);
  uint8_t x[400];
  fill(x, 400, 11);
  if (send(c, x, 400, 0) != 400 || send(c, x, 40, 0) != 40) e2e_fail("send: %s", strerror(errno));

  int u = udp(AF_INET);
  setsockopt(u, SOL_SOCKET, SO_BROADCAST, &one, sizeof one);
  const int rcv_set = opt(r4, SOL_SOCKET, SO_RCVBUF);

  if (e2e_sabotage()) recv(r4, x, sizeof x, 0);
  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);
  e2e_hold();

  // The queues, in order, from the same senders.
  expect(r4, 100, 1, &an, "R4");
  expect(r4, 1500, 2, &bn, "R4");
  expect(r4, 2, 3, &an, "R4");
  expect(r4, 9000, 4, &bn, "R4");
  expect(r4, 1, 5, &an, "R4");
  expect_empty(r4, "R4");
  expect(r6, 700, 6, &s6n, "R6");
  expect(r6, 3, 7, &s6n, "R6");
  expect_empty(r6, "R6");
  {
    uint8_t buf[512];
    char ctl[256];
    struct sockaddr_in6 f;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr mh = {.msg_name = &f,
                        .msg_namelen = sizeof f,
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl,
                        .msg_controllen = sizeof ctl};
    ssize_t n = recvmsg(rd, &mh, MSG_DONTWAIT);
    if (n != 222) e2e_fail("RD: the IPv4 datagram is missing or changed (%zd)", n);
    char s[INET6_ADDRSTRLEN];
    inet_ntop(AF_INET6, &f.sin6_addr, s, sizeof s);
    if (strcmp(s, "::ffff:127.0.0.1") != 0 || f.sin6_port != ((struct sockaddr_in*)&an)->sin_port)
      e2e_fail("RD: sender is %s, not A as ::ffff:127.0.0.1", s);
    int info = 0;
    for (struct cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
      if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_PKTINFO) {
        struct in6_pktinfo pi;
        memcpy(&pi, CMSG_DATA(cm), sizeof pi);
        inet_ntop(AF_INET6, &pi.ipi6_addr, s, sizeof s);
        if (strcmp(s, "::ffff:127.0.0.1") != 0) e2e_fail("RD: sent to %s, not 127.0.0.1", s);
        info = 1;
      }
    if (!info) e2e_fail("RD: no IPV6_PKTINFO (IPV6_RECVPKTINFO lost)");
    expect_empty(rd, "RD");
  }
  expect(c, 300, 9, &pn, "C");
  expect(c, 301, 10, &pn, "C");
  expect_empty(c, "C");
  expect(p, 400, 11, &cn, "P");
  expect(p, 40, 11, &cn, "P");
  expect_empty(p, "P");

  // Addresses and options.
  struct sockaddr_storage now = name_of(r4);
  if (!same(&now, &r4n)) e2e_fail("R4: address changed");
  now = name_of(rd);
  if (!same(&now, &rdn)) e2e_fail("RD: address changed");
  now = name_of(c);
  if (!same(&now, &cn)) e2e_fail("C: address changed");
  struct sockaddr_storage peer;
  socklen_t pl = sizeof peer;
  if (getpeername(c, (struct sockaddr*)&peer, &pl) != 0 || !same(&peer, &pn))
    e2e_fail("C: no longer connected to P");
  pl = sizeof peer;
  if (getpeername(p, (struct sockaddr*)&peer, &pl) == 0) e2e_fail("P: connected");
  if (!opt(r4, SOL_SOCKET, SO_REUSEADDR)) e2e_fail("R4: SO_REUSEADDR lost");
  if (opt(r4, SOL_SOCKET, SO_RCVBUF) != rcv_set) e2e_fail("R4: SO_RCVBUF changed");
  if (!(fcntl(r4, F_GETFL) & O_NONBLOCK)) e2e_fail("R4: O_NONBLOCK lost");
  if (!opt(r6, IPPROTO_IPV6, IPV6_V6ONLY)) e2e_fail("R6: IPV6_V6ONLY lost");
  if (opt(rd, IPPROTO_IPV6, IPV6_V6ONLY)) e2e_fail("RD: IPV6_V6ONLY set");
  if (opt(c, IPPROTO_IP, IP_TTL) != 7 || opt(c, IPPROTO_IP, IP_TOS) != 0x10)
    e2e_fail("C: IP_TTL or IP_TOS lost");
  if (!opt(u, SOL_SOCKET, SO_BROADCAST)) e2e_fail("U: SO_BROADCAST lost");
  now = name_of(u);
  if (((struct sockaddr_in*)&now)->sin_port != 0) e2e_fail("U: became bound");

  // Still working: C takes datagrams from P only.
  send_to(a, 50, 12, &cn);
  send_to(p, 60, 13, &cn);
  e2e_sleep_ms(20);
  expect(c, 60, 13, &pn, "C after the restore");
  expect_empty(c, "C (a datagram from another sender got through)");
  send_to(a, 70, 14, &r4n);
  send_to(u, 80, 15, &r4n);
  e2e_sleep_ms(20);
  expect(r4, 70, 14, &an, "R4 after the restore");
  expect(r4, 80, 15, NULL, "R4 after the restore");
  e2e_done();
}
