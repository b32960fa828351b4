// frame_proxy LISTEN_ADDR LISTEN_PORT TO_ADDR TO_PORT N: a man in the middle
// for one migration. Accepts one connection, connects to the receiver and
// forwards both ways; in the sender's stream it parses the frames
// (docs/migration.md: 24-byte header, u32 magic, u32 type, u64 length, u64
// check) and flips one bit of the check of content frame N (0-based), so
// the receiver must refuse a stream damaged in transit. Prints "listening"
// once ready, "corrupted" when it did. The library has no fault hook for this.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: frame_proxy LISTEN_ADDR LISTEN_PORT TO_ADDR TO_PORT N\n");
    return 2;
  }
  const long target = atol(argv[5]);
  int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  if (bind(ls, (struct sockaddr*)&a, sizeof a) != 0 || listen(ls, 1) != 0) {
    perror("frame_proxy: listen");
    return 1;
  }
  printf("listening\n");
  fflush(stdout);
  int c = accept(ls, NULL, NULL);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[4]))};
  inet_pton(AF_INET, argv[3], &to.sin_addr);
  if (c < 0 || connect(s, (struct sockaddr*)&to, sizeof to) != 0) {
    perror("frame_proxy: connect");
    return 1;
  }
  // Sender -> receiver: frame by frame. hdr collects a header; `left` is
  // what remains of the current payload.
  uint8_t hdr[24], buf[65536];
  size_t have = 0;
  uint64_t left = 0;
  long content = 0;
  struct pollfd p[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
  for (;;) {
    if (poll(p, 2, -1) < 0) return 1;
    if (p[1].revents) {  // receiver -> sender: as is
      ssize_t n = recv(s, buf, sizeof buf, 0);
      if (n <= 0 || send_all(c, buf, (size_t)n) != 0) break;
    }
    if (!p[0].revents) continue;
    if (left > 0) {
      ssize_t n = recv(c, buf, left < sizeof buf ? left : sizeof buf, 0);
      if (n <= 0 || send_all(s, buf, (size_t)n) != 0) break;
      left -= (uint64_t)n;
      continue;
    }
    ssize_t n = recv(c, hdr + have, sizeof hdr - have, 0);
    if (n <= 0) break;
    have += (size_t)n;
    if (have < sizeof hdr) continue;
    uint32_t type;
    memcpy(&type, hdr + 4, 4);
    memcpy(&left, hdr + 8, 8);
    if (type == 6 && content++ == target) {  // CONTENT
      hdr[16] ^= 1;
      printf("corrupted\n");
      fflush(stdout);
    }
    if (send_all(s, hdr, sizeof hdr) != 0) break;
    have = 0;
  }
  return 0;
}
