// udp_pair READY WORKDIR [ROUNDS]: two processes exchanging UDP datagrams,
// for cr_full --tree (job.sh with E2E_JOB_PROG=udp_pair E2E_JOB_PROCS=2).
// Before the fork the root makes its sockets R4 (127.0.0.1) and R6 ([::1],
// IPV6_V6ONLY), the child's C4 and C6 (the same, SO_RCVTIMEO 20 s) and a
// connected pair K (root) <-> L (child), each connected to the other. Each
// round the root sends, one round ahead of the child, a datagram to C4 from
// R4, one to C6 from R6 and one on K, of sizes fixed by the round; the child
// checks each (exact bytes, boundaries, sender address) and answers with
// three datagrams: C4 -> R4, C6 -> R6 and L -> K, which the root checks the
// same way. Both sleep between steps, so datagrams wait in the queues of both
// members at any moment. At the end the root checks that K is still
// connected to L and that the child's receive timeout is the one it set.
// Both members also hold SH (127.0.0.1, made before the fork: one socket
// for both): each round the child sends a datagram to SH from C4 and the
// root reads it there; at the end the child checks SH's address.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "e2e.h"

static long nrounds = 300;

static void fill(uint8_t* b, size_t n, long round, int salt) {
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)(e2e_mix(((uint64_t)round << 32) ^ ((uint64_t)salt << 20) ^ i) >> 7);
}
static size_t dg_len(long r, int salt) {
  return (size_t)((r * 37 + salt * 101) % 1400) + 1;
}

static int bound(int family, const char* addr) {
  int s = socket(family, SOCK_DGRAM, 0), one = 1;
  if (s < 0) e2e_fail("socket: %s", strerror(errno));
  struct sockaddr_storage a = {0};
  socklen_t len;
  if (family == AF_INET) {
    struct sockaddr_in* in = (struct sockaddr_in*)&a;
    in->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &in->sin_addr);
    len = sizeof *in;
  } else {
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    struct sockaddr_in6* in6 = (struct sockaddr_in6*)&a;
    in6->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &in6->sin6_addr);
    len = sizeof *in6;
  }
  if (bind(s, (struct sockaddr*)&a, len) != 0) e2e_fail("bind %s: %s", addr, strerror(errno));
  return s;
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
static int same(const struct sockaddr_storage* a, const struct sockaddr_storage* b) {
  if (a->ss_family != b->ss_family) return 0;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *x = (const void*)a, *y = (const void*)b;
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  const struct sockaddr_in6 *x = (const void*)a, *y = (const void*)b;
  return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, 16) == 0;
}

// Sends round r's datagram `salt` from s (to `to`, or to its peer when NULL).
static void put(int s, long r, int salt, const struct sockaddr_storage* to) {
  uint8_t b[1500];
  size_t n = dg_len(r, salt);
  fill(b, n, r, salt);
  ssize_t k = to ? sendto(s, b, n, 0, (const struct sockaddr*)to, len_of(to)) : send(s, b, n, 0);
  if (k != (ssize_t)n) e2e_fail("send of round %ld (%d): %s", r, salt, strerror(errno));
}

// Receives round r's datagram `salt` on s and checks it and its sender.
static void get(int s, long r, int salt, const struct sockaddr_storage* from, const char* who) {
  uint8_t b[65536], want[1500];
  struct sockaddr_storage f;
  socklen_t fl = sizeof f;
  ssize_t n;
  do n = recvfrom(s, b, sizeof b, 0, (struct sockaddr*)&f, &fl);
  while (n < 0 && errno == EINTR);
  if (n < 0) e2e_fail("%s: datagram %d of round %ld: %s", who, salt, r, strerror(errno));
  size_t len = dg_len(r, salt);
  if ((size_t)n != len)
    e2e_fail("%s: datagram %d of round %ld has %zd bytes, expected %zu", who, salt, r, n, len);
  fill(want, len, r, salt);
  if (memcmp(b, want, len) != 0) e2e_fail("%s: datagram %d of round %ld is wrong", who, salt, r);
  if (!same(&f, from)) e2e_fail("%s: datagram %d of round %ld from another sender", who, salt, r);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 3, "READY WORKDIR [ROUNDS]");
  if (argc > 3) nrounds = atol(argv[3]);
  int r4 = bound(AF_INET, "127.0.0.1"), r6 = bound(AF_INET6, "::1");
  int c4 = bound(AF_INET, "127.0.0.1"), c6 = bound(AF_INET6, "::1");
  int k = bound(AF_INET, "127.0.0.1"), l = bound(AF_INET, "127.0.0.1");
  int sh = bound(AF_INET, "127.0.0.1");
  struct sockaddr_storage shn = name_of(sh);
  struct sockaddr_storage r4n = name_of(r4), r6n = name_of(r6), c4n = name_of(c4),
                          c6n = name_of(c6), kn = name_of(k), ln = name_of(l);
  if (connect(k, (struct sockaddr*)&ln, len_of(&ln)) ||
      connect(l, (struct sockaddr*)&kn, len_of(&kn)))
    e2e_fail("connect: %s", strerror(errno));
  struct timeval tv = {20, 0};
  for (int *s = (int[]){c4, c6, l, r4, r6, k, sh}, i = 0; i < 7; i++)
    setsockopt(s[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  fflush(NULL);
  pid_t c = fork();
  if (c < 0) e2e_fail("fork: %s", strerror(errno));
  if (c == 0) {
    e2e_name = "udp_pair (child)";
    close(r4), close(r6), close(k);
    for (long r = 1; r <= nrounds; r++) {
      get(c4, r, 1, &r4n, "child C4");
      get(c6, r, 2, &r6n, "child C6");
      get(l, r, 3, &kn, "child L");
      e2e_pace(5);  // the root's next round waits in our queues
      put(c4, r, 4, &r4n);
      put(c6, r, 5, &r6n);
      put(l, r, 6, NULL);
      put(c4, r, 7, &shn);
    }
    struct sockaddr_storage now_sh = name_of(sh);
    if (!same(&now_sh, &shn)) e2e_fail("child: SH has another address");
    struct timeval now;
    socklen_t tl = sizeof now;
    if (getsockopt(c4, SOL_SOCKET, SO_RCVTIMEO, &now, &tl) != 0 || now.tv_sec != 20)
      e2e_fail("child: SO_RCVTIMEO lost");
    exit(0);
  }
  close(c4), close(c6), close(l);
  put(r4, 1, 1, &c4n);
  put(r6, 1, 2, &c6n);
  put(k, 1, 3, NULL);
  e2e_ready(argv[1]);
  for (long r = 1; r <= nrounds; r++) {
    if (r < nrounds) {  // one round ahead
      put(r4, r + 1, 1, &c4n);
      put(r6, r + 1, 2, &c6n);
      put(k, r + 1, 3, NULL);
    }
    e2e_pace(10);  // the child's answers wait in our queues
    get(r4, r, 4, &c4n, "root R4");
    get(r6, r, 5, &c6n, "root R6");
    get(k, r, 6, &ln, "root K");
    get(sh, r, 7, &c4n, "root SH");
  }
  struct sockaddr_storage peer;
  socklen_t pl = sizeof peer;
  if (getpeername(k, (struct sockaddr*)&peer, &pl) != 0 || !same(&peer, &ln))
    e2e_fail("root: K no longer connected to L");
  int status;
  if (waitpid(c, &status, 0) != c || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    e2e_fail("child failed (status 0x%x)", status);
  e2e_done();
}
