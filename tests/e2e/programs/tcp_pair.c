// tcp_pair READY WORKDIR [ROUNDS]: two processes talking over loopback TCP,
// for cr_full --tree. The root listens on 127.0.0.1 and on [::1] (when the
// host has IPv6), forks a child that connects to both, and accepts. Then,
// each round, the root sends a 4 KiB block (content fixed by the round) on
// the IPv4 connection and the child answers with its checksum on the IPv6
// one (IPv4 again without IPv6). Both sides stay a block ahead of the other
// and sleep between steps, so at any moment data sits unread in receive
// queues, in both directions. After the last round the child connects to
// the root's listener once more (a listening socket must work after the
// restore), sends the total, and exits 0 if every block it read was right;
// the root checks every answer, the total and the child's status, then
// prints "done".
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "e2e.h"

#define BLOCK 4096
static long nrounds = 300;

static void fill(uint64_t* b, long round) {
  for (size_t i = 0; i < BLOCK / 8; i++) b[i] = e2e_mix(((uint64_t)round << 32) ^ i);
}

static uint64_t sum(const uint64_t* b) {
  uint64_t s = 0;
  for (size_t i = 0; i < BLOCK / 8; i++) s = e2e_mix(s ^ b[i]);
  return s;
}

static void io_all(int fd, void* buf, size_t len, int out, const char* what) {
  char* p = buf;
  while (len > 0) {
    ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) e2e_fail("%s: %s", what, n == 0 ? "connection closed" : strerror(errno));
    p += n;
    len -= (size_t)n;
  }
}

static int listener(int family, uint16_t* port) {
  int s = socket(family, SOCK_STREAM, 0);
  if (s < 0) return -1;
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage sa = {0};
  socklen_t len;
  if (family == AF_INET) {
    struct sockaddr_in* in = (struct sockaddr_in*)&sa;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *in;
  } else {
    struct sockaddr_in6* in6 = (struct sockaddr_in6*)&sa;
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    len = sizeof *in6;
  }
  if (bind(s, (struct sockaddr*)&sa, len) != 0 || listen(s, 8) != 0) {
    close(s);
    return -1;
  }
  len = sizeof sa;
  getsockname(s, (struct sockaddr*)&sa, &len);
  *port = ntohs(family == AF_INET ? ((struct sockaddr_in*)&sa)->sin_port
                                  : ((struct sockaddr_in6*)&sa)->sin6_port);
  return s;
}

static int dial(int family, uint16_t port) {
  int s = socket(family, SOCK_STREAM, 0);
  struct sockaddr_storage sa = {0};
  socklen_t len;
  if (family == AF_INET) {
    struct sockaddr_in* in = (struct sockaddr_in*)&sa;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    in->sin_port = htons(port);
    len = sizeof *in;
  } else {
    struct sockaddr_in6* in6 = (struct sockaddr_in6*)&sa;
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    in6->sin6_port = htons(port);
    len = sizeof *in6;
  }
  if (s < 0 || connect(s, (struct sockaddr*)&sa, len) != 0)
    e2e_fail("connect to port %u: %s", port, strerror(errno));
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

static void child(uint16_t port4, uint16_t port6, int have6) {
  int data = dial(AF_INET, port4);
  int back = have6 ? dial(AF_INET6, port6) : data;
  uint64_t block[BLOCK / 8], want[BLOCK / 8], total = 0;
  for (long r = 1; r <= nrounds; r++) {
    io_all(data, block, BLOCK, 0, "child: reading a block");
    fill(want, r);
    if (memcmp(block, want, BLOCK) != 0) e2e_fail("child: block of round %ld is wrong", r);
    e2e_pace(5);  // the root's next block waits in our receive queue
    uint64_t s = sum(block);
    total ^= s;
    io_all(back, &s, sizeof s, 1, "child: answering");
  }
  int late = dial(AF_INET, port4);
  io_all(late, &total, sizeof total, 1, "child: sending the total");
  close(late);
  exit(0);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 3, "READY WORKDIR [ROUNDS]");
  if (argc > 3) nrounds = atol(argv[3]);
  uint16_t port4 = 0, port6 = 0;
  int l4 = listener(AF_INET, &port4);
  if (l4 < 0) e2e_fail("listen on 127.0.0.1: %s", strerror(errno));
  int l6 = listener(AF_INET6, &port6);
  const int have6 = l6 >= 0;
  fflush(NULL);
  pid_t c = fork();
  if (c < 0) e2e_fail("fork: %s", strerror(errno));
  if (c == 0) {
    e2e_name = "tcp_pair (child)";
    close(l4);
    if (have6) close(l6);
    child(port4, port6, have6);
  }
  int data = accept(l4, NULL, NULL);
  int back = have6 ? accept(l6, NULL, NULL) : data;
  if (data < 0 || back < 0) e2e_fail("accept: %s", strerror(errno));
  int one = 1;
  setsockopt(data, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  uint64_t block[BLOCK / 8], total = 0;
  fill(block, 1);
  io_all(data, block, BLOCK, 1, "root: sending block 1");
  e2e_ready(argv[1]);
  for (long r = 1; r <= nrounds; r++) {
    if (r < nrounds) {  // one block ahead of the child
      fill(block, r + 1);
      io_all(data, block, BLOCK, 1, "root: sending a block");
    }
    e2e_pace(10);  // the child's answer waits in our receive queue
    uint64_t s;
    io_all(back, &s, sizeof s, 0, "root: reading an answer");
    fill(block, r);
    if (s != sum(block)) e2e_fail("root: answer of round %ld is wrong", r);
    total ^= s;
  }
  // Accepted connections inherit the listener's SO_REUSEADDR; a checkpoint
  // that puts them in repair mode must not lose it.
  int reuse = 0;
  socklen_t rlen = sizeof reuse;
  if (getsockopt(data, SOL_SOCKET, SO_REUSEADDR, &reuse, &rlen) != 0 || !reuse)
    e2e_fail("root: the connection lost SO_REUSEADDR");
  int late = accept(l4, NULL, NULL);
  if (late < 0) e2e_fail("accept after the rounds: %s", strerror(errno));
  uint64_t got;
  io_all(late, &got, sizeof got, 0, "root: reading the total");
  close(late);
  if (got != total) e2e_fail("root: the child's total differs");
  int st;
  if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    e2e_fail("child failed (status 0x%x)", st);
  e2e_done();
}
