// recv_clients PORT COUNT MODE SOURCE: COUNT clients of a cr_recv listening
// on 127.0.0.1:PORT that do not know the token. Each connects from SOURCE
// (an address; "127.0.1.%d" numbers them 1..COUNT, so each is a source of
// its own), then:
//   idle   sends nothing
//   slow   sends the start of a HELLO frame, one byte every 500 ms
//   junk   sends 4 KiB of random bytes and closes
//   close  closes at once
// Prints "connected N" once all are connected. idle and slow then keep their
// connections until SIGTERM and print "closed-by-peer K": how many of them
// the receiver had closed. Exit 0, or 1 if a connection failed.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_term(int sig) {
  (void)sig;
  stop = 1;
}

static int connect_from(const char* src, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET};
  if (inet_pton(AF_INET, src, &a.sin_addr) != 1) return -1;
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0) return -1;
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd, (struct sockaddr*)&to, sizeof to) != 0) return -1;
  return fd;
}

// Whether the peer closed (or reset) fd.
static int closed_by_peer(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
  if (n == 0) return 1;
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return 1;
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: recv_clients PORT COUNT idle|slow|junk|close SOURCE\n");
    return 2;
  }
  const int port = atoi(argv[1]), count = atoi(argv[2]);
  const char* mode = argv[3];
  const char* source = argv[4];
  int* fds = calloc((size_t)count, sizeof *fds);
  signal(SIGTERM, on_term);
  for (int i = 0; i < count; ++i) {
    char src[64];
    snprintf(src, sizeof src, source, i + 1);
    fds[i] = connect_from(src, port);
    if (fds[i] < 0) {
      fprintf(stderr, "recv_clients: connection %d from %s: %s\n", i + 1, src, strerror(errno));
      return 1;
    }
    if (!strcmp(mode, "junk")) {
      char junk[4096];
      if (getrandom(junk, sizeof junk, 0) != (ssize_t)sizeof junk) return 1;
      (void)send(fds[i], junk, sizeof junk, MSG_NOSIGNAL);
    }
    if (!strcmp(mode, "junk") || !strcmp(mode, "close")) close(fds[i]);
  }
  printf("connected %d\n", count);
  fflush(stdout);
  if (!strcmp(mode, "junk") || !strcmp(mode, "close")) return 0;
  // The start of a HELLO frame: magic, type 1, length 40, ...
  static const unsigned char hello[] = {0x89, 0x4B, 0x4D, 0x47, 1, 0, 0, 0, 40, 0, 0, 0,
                                        0,    0,    0,    0,    0, 0, 0, 0, 0,  0, 0, 0};
  size_t sent = 0;
  while (!stop) {
    struct timespec ts = {0, 500 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (strcmp(mode, "slow") || sent >= sizeof hello) continue;
    for (int i = 0; i < count; ++i) (void)send(fds[i], hello + sent, 1, MSG_NOSIGNAL);
    ++sent;
  }
  int closed = 0;
  for (int i = 0; i < count; ++i) closed += closed_by_peer(fds[i]);
  printf("closed-by-peer %d\n", closed);
  return 0;
}
