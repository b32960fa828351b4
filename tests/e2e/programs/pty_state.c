// pty_state READY: two ptys (both ends in this process) holding what no
// side has read across a checkpoint.
//   pty A, canonical: window 33x77, VEOL '@'; input not read by the slave:
//          a line ended by '\n', one ended by VEOL, one ended by VEOF, an
//          empty one (VEOF alone: end of file), then a line being typed
//          (erase applied: "typx<DEL>ing"); output not read by the master
//   pty B, raw, packet mode on the master: its status not read (input
//          flushed, output stopped and started again, flow control turned
//          on and off: FLUSHREAD | START | NOSTOP); raw input and output not
//          read, with bytes that canonical mode or ISIG would act on
// then waits ~3 s (the driver checkpoints, kills and restores meanwhile) and
// reads everything: each line as one read, the typed line only once it is
// ended, the status byte first, every byte as written.
#define _GNU_SOURCE
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "e2e.h"

#define HOLD_MS 3000

static int open_pty(int* slave) {
  int m = posix_openpt(O_RDWR | O_NOCTTY);
  if (m < 0 || grantpt(m) != 0 || unlockpt(m) != 0) e2e_fail("posix_openpt: %s", strerror(errno));
  *slave = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK);
  if (*slave < 0) e2e_fail("TIOCGPTPEER: %s", strerror(errno));
  return m;
}

static void put(int fd, const void* p, size_t n, const char* what) {
  if (write(fd, p, n) != (ssize_t)n) e2e_fail("%s: write: %s", what, strerror(errno));
}

// The next read of `fd`, which must be ready within 2 s.
static ssize_t next_read(int fd, char* buf, size_t n, const char* what) {
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, 2000) != 1) e2e_fail("%s: nothing to read", what);
  ssize_t r = read(fd, buf, n);
  if (r < 0) e2e_fail("%s: read: %s", what, strerror(errno));
  return r;
}

// `n` bytes of `p`, printable on one line.
static const char* esc(const char* p, size_t n, char* out) {
  char* o = out;
  for (size_t i = 0; i < n && i < 64; i++)
    o += (p[i] >= ' ' && p[i] < 127) ? sprintf(o, "%c", p[i])
                                     : sprintf(o, "\\x%02x", (unsigned char)p[i]);
  *o = 0;
  return out;
}

static void expect_read(int fd, const char* want, size_t n, const char* what) {
  char buf[512], a[300], b[300];
  ssize_t r = next_read(fd, buf, sizeof buf, what);
  if ((size_t)r != n || memcmp(buf, want, n) != 0)
    e2e_fail("%s: read %zd bytes (\"%s\"), expected %zu (\"%s\")", what, r,
             esc(buf, r > 0 ? (size_t)r : 0, a), n, esc(want, n, b));
}

static void expect_nothing(int fd, const char* what) {
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, 100) != 0) e2e_fail("%s: more to read than was written", what);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  int sa, sb;
  int ma = open_pty(&sa), mb = open_pty(&sb);

  struct termios ta;
  tcgetattr(sa, &ta);
  ta.c_lflag &= ~(tcflag_t)ECHO;
  ta.c_cc[VEOL] = '@';
  tcsetattr(sa, TCSANOW, &ta);
  struct winsize wa = {33, 77, 0, 0};
  ioctl(sa, TIOCSWINSZ, &wa);
  const char in_a[] = "first line\nsecond@third\004\004typx\177ing";
  put(ma, in_a, sizeof in_a - 1, "pty A input");
  const char out_a[] = "output of A\nnot read yet";
  const char seen_a[] = "output of A\r\nnot read yet";  // ONLCR
  put(sa, out_a, sizeof out_a - 1, "pty A output");

  struct termios tb;
  tcgetattr(sb, &tb);
  cfmakeraw(&tb);
  tcsetattr(sb, TCSANOW, &tb);
  int on = 1;
  ioctl(mb, TIOCPKT, &on);
  tcflush(sb, TCIFLUSH);  // FLUSHREAD
  tcflow(sb, TCOOFF);     // STOP ...
  tcflow(sb, TCOON);      // ... then START
  tb.c_iflag |= IXON;     // DOSTOP ...
  tcsetattr(sb, TCSANOW, &tb);
  tb.c_iflag &= ~(tcflag_t)IXON;  // ... then NOSTOP
  tcsetattr(sb, TCSANOW, &tb);
  const char in_b[] = "raw\003\n\004\177\0\r\xff-end";
  put(mb, in_b, sizeof in_b - 1, "pty B input");
  const char out_b[] = "raw output\n\r\0\xfe";
  put(sb, out_b, sizeof out_b - 1, "pty B output");
  usleep(50000);  // the line disciplines take what was written

  if (e2e_sabotage()) {
    char x[64];
    if (read(sa, x, sizeof x) <= 0) e2e_fail("sabotage read");
  }
  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);

  // pty A: settings, each line one read, the typed line once ended.
  struct termios ga;
  struct winsize gw;
  tcgetattr(sa, &ga);
  ioctl(sa, TIOCGWINSZ, &gw);
  if (gw.ws_row != 33 || gw.ws_col != 77) e2e_fail("pty A: window %dx%d", gw.ws_row, gw.ws_col);
  if (ga.c_cc[VEOL] != '@' || (ga.c_lflag & ECHO) || !(ga.c_lflag & ICANON))
    e2e_fail("pty A: terminal settings changed");
  expect_read(sa, "first line\n", 11, "pty A line 1");
  expect_read(sa, "second@", 7, "pty A line 2");
  expect_read(sa, "third", 5, "pty A line 3 (VEOF)");
  expect_read(sa, "", 0, "pty A line 4 (end of file)");
  expect_nothing(sa, "pty A before the typed line ends");
  put(ma, "\n", 1, "pty A newline");
  expect_read(sa, "typing\n", 7, "pty A typed line");
  expect_read(ma, seen_a, sizeof seen_a - 1, "pty A output");
  expect_nothing(ma, "pty A output");

  // pty B: the status byte first, then output as data packets; raw input.
  char st;
  if (next_read(mb, &st, 1, "pty B status") != 1 ||
      st != (TIOCPKT_FLUSHREAD | TIOCPKT_START | TIOCPKT_NOSTOP))
    e2e_fail("pty B: packet status 0x%02x, expected 0x%02x", (unsigned char)st,
             TIOCPKT_FLUSHREAD | TIOCPKT_START | TIOCPKT_NOSTOP);
  char pkt[sizeof out_b];
  pkt[0] = TIOCPKT_DATA;
  memcpy(pkt + 1, out_b, sizeof out_b - 1);
  expect_read(mb, pkt, sizeof pkt, "pty B output");
  expect_read(sb, in_b, sizeof in_b - 1, "pty B input");
  expect_nothing(sb, "pty B input");
  put(mb, "more", 4, "pty B after");
  expect_read(sb, "more", 4, "pty B after");
  e2e_done();
}
