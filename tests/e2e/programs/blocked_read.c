// blocked_read READY LINE: signals ready, then blocks in read(2) on stdin (a
// pipe the driver controls) until a whole line arrives, and checks that it is
// exactly LINE. A checkpoint or restore while blocked must be invisible: the
// read is restarted, never failed with EINTR. Waits as long as the driver
// makes it wait (the driver bounds that).
#include "e2e.h"

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY LINE");
  const char* want = argv[2];
  char buf[4096];
  size_t n = 0;

  e2e_ready(argv[1]);
  while (n == 0 || buf[n - 1] != '\n') {
    if (n == sizeof buf) e2e_fail("no newline in %zu bytes", n);
    ssize_t r = read(STDIN_FILENO, buf + n, sizeof buf - n);
    if (r < 0) e2e_fail("read: %s", strerror(errno));
    if (r == 0) e2e_fail("end of input after %zu bytes, before a whole line", n);
    n += (size_t)r;
  }
  buf[n - 1] = '\0';
  if (strlen(buf) != n - 1 || strcmp(buf, want) != 0)
    e2e_fail("read \"%.100s\", expected \"%.100s\"", buf, want);
  e2e_done();
}
