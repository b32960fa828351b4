// tcp_stream serve|connect ADDR PORT BYTES: one TCP connection over which
// both ends stream BYTES bytes of a known sequence at a steady pace (512
// bytes every 10 ms) while checking every byte they receive. The server
// stands for a peer outside the checkpointed job (tcp_outside.sh): it is
// never checkpointed, and fails on any reset, early end of file or wrong
// byte. Each end prints "got N" lines as it receives (the driver waits for
// them) and, when both directions are complete, "ok SENT RECEIVED" and
// exits 0; on any fault one line on stderr and exit 1.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// Byte i of the stream that `who` (0 server, 1 client) sends.
static uint8_t stream_byte(int who, uint64_t i) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)(who + 1) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  return (uint8_t)(x * 0xBF58476D1CE4E5B9ull >> 56);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int die(const char* what) {
  fprintf(stderr, "tcp_stream: %s: %s\n", what, strerror(errno));
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: tcp_stream serve|connect ADDR PORT BYTES\n");
    return 2;
  }
  const int server = strcmp(argv[1], "serve") == 0;
  const uint64_t total = strtoull(argv[4], NULL, 10);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
  if (inet_pton(AF_INET, argv[2], &sa.sin_addr) != 1) return die("address");
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return die("socket");
  if (server) {
    int on = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(s, (struct sockaddr*)&sa, sizeof sa) != 0 || listen(s, 1) != 0) return die("listen");
    int c = accept(s, NULL, NULL);
    if (c < 0) return die("accept");
    close(s);
    s = c;
  } else if (connect(s, (struct sockaddr*)&sa, sizeof sa) != 0) {
    return die("connect");
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  const int me = server ? 0 : 1;
  uint64_t sent = 0, got = 0, reported = 0;
  double next = now();
  while (sent < total || got < total) {
    struct pollfd p = {.fd = s, .events = POLLIN | (sent < total && now() >= next ? POLLOUT : 0)};
    int wait_ms = sent < total ? (int)((next - now()) * 1000) : 1000;
    if (wait_ms < 0) wait_ms = 0;
    if (poll(&p, 1, p.events & POLLOUT ? 1000 : wait_ms + 1) < 0 && errno != EINTR)
      return die("poll");
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
      uint8_t buf[4096];
      ssize_t n = recv(s, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return die("receiving");
      if (n == 0) {
        fprintf(stderr, "tcp_stream: end of file after %llu of %llu bytes\n",
                (unsigned long long)got, (unsigned long long)total);
        return 1;
      }
      for (ssize_t k = 0; k < n; ++k, ++got)
        if (buf[k] != stream_byte(1 - me, got)) {
          fprintf(stderr, "tcp_stream: byte %llu differs\n", (unsigned long long)got);
          return 1;
        }
      if (got - reported >= 8192 || (got == total && reported != got)) {
        printf("got %llu\n", (unsigned long long)got);
        reported = got;
      }
    }
    if (p.revents & POLLOUT) {
      uint8_t buf[512];
      size_t n = total - sent < sizeof buf ? (size_t)(total - sent) : sizeof buf;
      for (size_t k = 0; k < n; ++k) buf[k] = stream_byte(me, sent + k);
      ssize_t w = send(s, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w < 0 && errno != EAGAIN && errno != EINTR) return die("sending");
      if (w > 0) sent += (uint64_t)w;
      next += 0.010;
      if (next < now() - 1) next = now();  // after a long stop: no burst
    }
  }
  printf("ok %llu %llu\n", (unsigned long long)sent, (unsigned long long)got);
  return 0;
}
