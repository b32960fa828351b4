// stop_at_frame.so: preloaded into cr_noded by nodes_failure.sh (never part
// of the library), so that a test can fail a node at an exact step of a
// round instead of racing it with a sleep. CKPT_STOP_FRAME=TYPE[:STEP]
// names a frame of the migration/node protocol (migrate/protocol.hpp: 16 is
// NODE_STEP, then STEP is its u32 step; 12 is APPLIED): the first process
// about to send one writes its PID to CKPT_STOP_PID_FILE and stops itself
// (SIGSTOP) before the frame leaves. The test then kills it, or cuts its
// link and lets it go on (SIGCONT).
// CKPT_EXIT_LINGER_MS=N: every _exit waits N ms first, so that a session
// that has finished its work stays alive a while, as it may on a loaded
// machine (the window serve_where must wait out).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static int stopped;

static uint32_t le32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void maybe_stop(const struct msghdr* mh) {
  const char* want = getenv("CKPT_STOP_FRAME");
  if (stopped || !want || mh->msg_iovlen < 1 || mh->msg_iov[0].iov_len != 24) return;
  const uint8_t* h = mh->msg_iov[0].iov_base;
  char* end = NULL;
  unsigned long type = strtoul(want, &end, 10);
  if (le32(h + 4) != type) return;
  if (*end == ':') {
    if (mh->msg_iovlen < 2 || mh->msg_iov[1].iov_len < 4) return;
    if (le32(mh->msg_iov[1].iov_base) != strtoul(end + 1, NULL, 10)) return;
  }
  stopped = 1;
  const char* path = getenv("CKPT_STOP_PID_FILE");
  if (path) {
    char tmp[4096], text[32];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      int n = snprintf(text, sizeof text, "%d\n", getpid());
      if (write(fd, text, (size_t)n) != n) {
      }
      close(fd);
      rename(tmp, path);
    }
  }
  raise(SIGSTOP);
}

ssize_t sendmsg(int fd, const struct msghdr* mh, int flags) {
  static ssize_t (*real)(int, const struct msghdr*, int);
  if (!real) real = (ssize_t(*)(int, const struct msghdr*, int))dlsym(RTLD_NEXT, "sendmsg");
  maybe_stop(mh);
  return real(fd, mh, flags);
}

void _exit(int status) {
  static void (*real)(int);
  if (!real) real = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
  const char* ms = getenv("CKPT_EXIT_LINGER_MS");
  if (ms) usleep((useconds_t)strtoul(ms, NULL, 10) * 1000);
  real(status);
  for (;;) {
  }
}
