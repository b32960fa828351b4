// fd_pipe READY DIR: pipes and a FIFO with unread data across a checkpoint.
// Before ready:
//   pipe A  (read end at the lower fd) sized to 256 KiB, 100 KiB written and
//           not read (more than a default 64 KiB pipe holds); read end O_NONBLOCK
//   pipe B  (write end at the lower fd), a short message not read
//   pipe C  a message, then the write end closed: data, then end of file
//   pipe D  the read end closed: writing fails with EPIPE (SIGPIPE ignored)
//   FIFO    DIR/fifo opened for reading (O_NONBLOCK) and for writing, a
//           message not read
// then waits ~3 s (the driver checkpoints, kills and restores meanwhile) and
// reads everything back, byte for byte, and checks the pipes still work.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "e2e.h"

#define HOLD_MS 3000
#define A_SIZE (256 * 1024)
#define A_DATA (100 * 1024)

static uint8_t pat(uint64_t salt, size_t i) {
  return (uint8_t)e2e_mix(salt * 1000003 + i);
}

static void write_all_or_fail(int fd, const void* p, size_t n, const char* what) {
  const uint8_t* b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w <= 0) e2e_fail("%s: write: %s", what, strerror(errno));
    b += w;
    n -= (size_t)w;
  }
}

// Reads exactly n bytes (the fd may be non-blocking: the data must be there).
static void read_exact_or_fail(int fd, void* p, size_t n, const char* what) {
  uint8_t* b = p;
  while (n) {
    ssize_t r = read(fd, b, n);
    if (r < 0) e2e_fail("%s: read: %s (%zu bytes missing)", what, strerror(errno), n);
    if (r == 0) e2e_fail("%s: end of file with %zu bytes missing", what, n);
    b += r;
    n -= (size_t)r;
  }
}

static void expect_empty(int fd, const char* what) {
  int avail = -1;
  if (ioctl(fd, FIONREAD, &avail) != 0 || avail != 0)
    e2e_fail("%s: %d bytes more than written", what, avail);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY DIR");
  const char* dir = argv[2];
  signal(SIGPIPE, SIG_IGN);

  int a[2];
  if (pipe(a) != 0) e2e_fail("pipe: %s", strerror(errno));
  if (fcntl(a[0], F_SETPIPE_SZ, A_SIZE) < A_SIZE) e2e_fail("F_SETPIPE_SZ: %s", strerror(errno));
  static uint8_t buf[A_DATA];
  for (size_t i = 0; i < A_DATA; i++) buf[i] = pat(1, i);
  write_all_or_fail(a[1], buf, A_DATA, "pipe A");
  fcntl(a[0], F_SETFL, O_NONBLOCK);

  // Pipe B with its write end at the lower number.
  int b[2], tmp[2];
  if (pipe(tmp) != 0) e2e_fail("pipe: %s", strerror(errno));
  b[1] = dup2(tmp[1], 20);
  b[0] = dup2(tmp[0], 21);
  if (b[0] != 21 || b[1] != 20) e2e_fail("dup2: %s", strerror(errno));
  close(tmp[0]);
  close(tmp[1]);
  const char* msg_b = "message in pipe B, write end first";
  write_all_or_fail(b[1], msg_b, strlen(msg_b), "pipe B");

  int c[2];
  if (pipe(c) != 0) e2e_fail("pipe: %s", strerror(errno));
  const char* msg_c = "last words before the writer closed";
  write_all_or_fail(c[1], msg_c, strlen(msg_c), "pipe C");
  close(c[1]);

  int d[2];
  if (pipe(d) != 0) e2e_fail("pipe: %s", strerror(errno));
  close(d[0]);

  char fifo[4096];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  unlink(fifo);
  if (mkfifo(fifo, 0600) != 0) e2e_fail("mkfifo %s: %s", fifo, strerror(errno));
  int fr = open(fifo, O_RDONLY | O_NONBLOCK);
  int fw = open(fifo, O_WRONLY);
  if (fr < 0 || fw < 0) e2e_fail("open %s: %s", fifo, strerror(errno));
  const char* msg_f = "through the named FIFO";
  write_all_or_fail(fw, msg_f, strlen(msg_f), "FIFO");

  if (e2e_sabotage()) {
    uint8_t x;
    if (read(a[0], &x, 1) != 1) e2e_fail("sabotage read");
  }
  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);

  // Pipe A: capacity, flags, 100 KiB in order, nothing more.
  int cap = fcntl(a[0], F_GETPIPE_SZ);
  if (cap != A_SIZE) e2e_fail("pipe A: capacity %d, expected %d", cap, A_SIZE);
  if (!(fcntl(a[0], F_GETFL) & O_NONBLOCK)) e2e_fail("pipe A: read end lost O_NONBLOCK");
  if (fcntl(a[1], F_GETFL) & O_NONBLOCK) e2e_fail("pipe A: write end became O_NONBLOCK");
  static uint8_t got[A_DATA];
  read_exact_or_fail(a[0], got, A_DATA, "pipe A");
  for (size_t i = 0; i < A_DATA; i++)
    if (got[i] != pat(1, i)) e2e_fail("pipe A: byte %zu differs", i);
  expect_empty(a[0], "pipe A");
  write_all_or_fail(a[1], "ping", 4, "pipe A after restore");
  char p4[5] = {0};
  read_exact_or_fail(a[0], p4, 4, "pipe A after restore");
  if (strcmp(p4, "ping") != 0) e2e_fail("pipe A: no longer connects its ends");

  char m[128] = {0};
  read_exact_or_fail(b[0], m, strlen(msg_b), "pipe B");
  if (strcmp(m, msg_b) != 0) e2e_fail("pipe B: read \"%s\"", m);
  expect_empty(b[0], "pipe B");
  write_all_or_fail(b[1], "pong", 4, "pipe B after restore");
  memset(m, 0, sizeof m);
  read_exact_or_fail(b[0], m, 4, "pipe B after restore");
  if (strcmp(m, "pong") != 0) e2e_fail("pipe B: no longer connects its ends");

  memset(m, 0, sizeof m);
  read_exact_or_fail(c[0], m, strlen(msg_c), "pipe C");
  if (strcmp(m, msg_c) != 0) e2e_fail("pipe C: read \"%s\"", m);
  if (read(c[0], m, 1) != 0) e2e_fail("pipe C: no end of file after its data");

  if (write(d[1], "x", 1) != -1 || errno != EPIPE)
    e2e_fail("pipe D: writing without a reader did not fail with EPIPE");

  memset(m, 0, sizeof m);
  read_exact_or_fail(fr, m, strlen(msg_f), "FIFO");
  if (strcmp(m, msg_f) != 0) e2e_fail("FIFO: read \"%s\"", m);
  expect_empty(fr, "FIFO");
  write_all_or_fail(fw, "again", 5, "FIFO after restore");
  memset(m, 0, sizeof m);
  read_exact_or_fail(fr, m, 5, "FIFO after restore");
  if (strcmp(m, "again") != 0) e2e_fail("FIFO: no longer connects its ends");
  e2e_done();
}
