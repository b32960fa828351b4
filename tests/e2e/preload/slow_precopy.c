// slow_precopy.so: preloaded into cr_full/cr_incr --live by live.sh (never
// part of the library). CKPT_PRELOAD_PRECOPY_SLEEP=S makes the tool wait S
// seconds before it reads the target's memory while the target runs
// untraced (a pre-copy round's copy), at most once every S seconds, so the
// test can end the process, or the tool, in that window. Reads of a target
// the tool has frozen (traced) are never delayed: the freeze stays as short
// as without the preload.
// CKPT_PRELOAD_PRECOPY_MARK=DIR: each such wait first creates DIR/window-N
// (N = 1, 2, ...), so a test learns the tool is in the window without
// guessing how long the tool takes to get there. With
// CKPT_PRELOAD_PRECOPY_HOLD=N, wait N lasts until DIR/release exists (or
// the tool is killed), instead of S seconds.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

// Whether pid has a tracer (the tool holds it frozen).
static int traced(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE* f = fopen(path, "r");
  int tracer = 0;
  if (!f) return 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "TracerPid: %d", &tracer) == 1) break;
  fclose(f);
  return tracer != 0;
}

static void touch(const char* dir, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "w");
  if (f) fclose(f);
}

static int exists(const char* dir, const char* name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

// One wait of a pre-copy copy: the window a test acts in.
static void window(long long wait_us) {
  static long n;
  const char* dir = getenv("CKPT_PRELOAD_PRECOPY_MARK");
  const char* hold = getenv("CKPT_PRELOAD_PRECOPY_HOLD");
  char name[64];
  snprintf(name, sizeof name, "window-%ld", ++n);
  if (dir) touch(dir, name);
  if (dir && hold && atol(hold) == n) {
    while (!exists(dir, "release")) usleep(10 * 1000);
    return;
  }
  usleep((useconds_t)wait_us);
}

ssize_t process_vm_readv(pid_t pid, const struct iovec* l, unsigned long ln, const struct iovec* r,
                         unsigned long rn, unsigned long flags) {
  static ssize_t (*real)(pid_t, const struct iovec*, unsigned long, const struct iovec*,
                         unsigned long, unsigned long);
  static long long last;  // when the last wait ended, in us (0: never)
  if (!real) real = dlsym(RTLD_NEXT, "process_vm_readv");
  const char* s = getenv("CKPT_PRELOAD_PRECOPY_SLEEP");
  long long wait = s ? (long long)(atof(s) * 1e6) : 0;
  long long was = __atomic_load_n(&last, __ATOMIC_RELAXED);
  if (wait > 0 && (was == 0 || now_us() - was >= wait) && !traced(pid)) {
    window(wait);
    __atomic_store_n(&last, now_us(), __ATOMIC_RELAXED);
  }
  return real(pid, l, ln, r, rn, flags);
}
