// sleeper READY [nanosleep|sleep]: signals ready, then sleeps once for 3 s,
// either with the raw nanosleep(2) system call (default) or with sleep(3)
// (glibc: clock_nanosleep(2) on CLOCK_REALTIME). A checkpoint or restore in the
// middle must be transparent: the call returns 0 (not EINTR, nothing left to
// sleep) and at least 3 s of CLOCK_MONOTONIC passed (same node: the clock
// keeps running while the process is frozen or not yet restored).
#include <sys/syscall.h>

#include "e2e.h"

#define SLEEP_S 3

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY [nanosleep|sleep]");
  const char* how = argc > 2 ? argv[2] : "nanosleep";
  int raw = strcmp(how, "nanosleep") == 0;
  if (!raw && strcmp(how, "sleep") != 0) e2e_fail("unknown sleep kind %s", how);

  e2e_ready(argv[1]);
  double start = e2e_now();
  if (raw) {
    struct timespec ts = {SLEEP_S, 0}, rem = {0, 0};
    long rc = syscall(SYS_nanosleep, &ts, &rem);
    if (rc != 0)
      e2e_fail("nanosleep returned %ld (%s) with %ld.%09ld s left", rc, strerror(errno),
               (long)rem.tv_sec, rem.tv_nsec);
  } else {
    unsigned left = sleep(SLEEP_S);
    if (left != 0) e2e_fail("sleep returned early with %u s left", left);
  }
  double slept = e2e_now() - start;
  if (slept < SLEEP_S) e2e_fail("slept only %.3f s of %d s", slept, SLEEP_S);
  e2e_done();
}
