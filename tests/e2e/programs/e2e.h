// Shared helpers of the end-to-end test programs (zdtm style: each program sets
// up some state, signals readiness, keeps working or waiting for a bounded time,
// then checks its OWN state and exits 0 if it is intact, 1 if not).
//
// Protocol (run_case.sh relies on it):
//   argv[1]        the "ready file": created (atomically, by rename) once the
//                  state is set up; the driver checkpoints after it appears.
//   exit 0         every check passed;
//   exit 1         a check failed; one line "<program>: <reason>" on stderr.
//   TEST_SABOTAGE=1  programs with a sabotage hook corrupt their own state just
//                  before they signal readiness, so the self-check must fail
//                  (proves the checks can fail). Never set in normal runs.
//
// Besides its own checks, every program verifies at the end that its PID and
// its set of open file descriptors are what they were when it became ready:
// a restored process must not notice that it was restored. (E2E_NEW_PID_OK=1
// at start waives the PID check, for restores with --new-pid.) The ready file
// holds "<pid> <nonce>" (a random number drawn at start) and a successful end
// prints "done <pid> <nonce>" on stdout, so the driver can tell that the
// process that finished is the one that was checkpointed, not a fresh start.
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define E2E_MAX_FDS 64

static const char* e2e_name = "e2e";
static pid_t e2e_pid;
static int e2e_new_pid_ok;
static unsigned long long e2e_nonce;
// Open fds at ready time, as "number -> target" where pipes and sockets are
// reduced to their type (a restored pipe is a new pipe, with a new inode).
static char e2e_fds[E2E_MAX_FDS][300];
static int e2e_nfds = -1;

__attribute__((noreturn, format(printf, 1, 2))) static inline void e2e_fail(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s: %s\n", e2e_name, msg);
  exit(1);
}

static inline void e2e_init(int argc, char** argv, int min_args, const char* usage) {
  const char* slash = strrchr(argv[0], '/');
  e2e_name = slash ? slash + 1 : argv[0];
  if (argc < min_args + 1) {
    fprintf(stderr, "usage: %s %s\n", e2e_name, usage);
    exit(2);
  }
  e2e_pid = getpid();
  const char* s = getenv("E2E_NEW_PID_OK");
  e2e_new_pid_ok = s && strcmp(s, "1") == 0;
  if (getrandom(&e2e_nonce, sizeof e2e_nonce, 0) != sizeof e2e_nonce)
    e2e_fail("getrandom: %s", strerror(errno));
}

static inline int e2e_sabotage(void) {
  const char* s = getenv("TEST_SABOTAGE");
  return s && strcmp(s, "1") == 0;
}

static inline double e2e_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Sleeps `ms` milliseconds in total, resuming after interruptions: for the
// programs that merely wait, an EINTR is not what they test.
static inline void e2e_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
    if (errno != EINTR) e2e_fail("nanosleep: %s", strerror(errno));
  }
}

// E2E_HOLD_FILE: the program does not end while that file exists (polled
// every 20 ms), so a test that takes several checkpoints of it cannot lose a
// race with it on a fast or a loaded machine. The test removes the file
// when it is done; a restored process finds it gone.
static inline void e2e_hold(void) {
  const char* f = getenv("E2E_HOLD_FILE");
  if (!f || !*f) return;
  while (access(f, F_OK) == 0) e2e_sleep_ms(20);
}

// A paced program's pause between rounds: `ms`, or nothing once
// E2E_PACE_FILE is set and that file is gone. A test keeps the file while it
// checkpoints the program (which then cannot end first, on any machine) and
// removes it to let the remaining rounds run at full speed.
static inline void e2e_pace(long ms) {
  const char* f = getenv("E2E_PACE_FILE");
  if (f && *f && access(f, F_OK) != 0) return;
  e2e_sleep_ms(ms);
}

// splitmix64's finalizer: a cheap, well-mixed, position-dependent pattern.
static inline uint64_t e2e_mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Fills `out` with the open fds of this process (excluding the directory
// stream used to list them and libckpt's tracker fd); returns how many.
static inline int e2e_list_fds(char (*out)[300], int max) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) e2e_fail("opendir /proc/self/fd: %s", strerror(errno));
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd == dirfd(d)) continue;
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len < 0) continue;
    target[len] = '\0';
    // libckpt's pagemap-scan tracker keeps its userfaultfd open in the
    // tracked process between checkpoints (fd 1000, or below RLIMIT_NOFILE
    // when that is lower; close-on-exec): not the program's own, and these
    // programs make none themselves.
    if (strcmp(target, "anon_inode:[userfaultfd]") == 0) continue;
    // "pipe:[1234]" -> "pipe:", "socket:[..]" -> "socket:".
    char* bracket = strstr(target, ":[");
    if (bracket && target[0] != '/') bracket[1] = '\0';
    if (n == max) e2e_fail("more than %d open fds", max);
    snprintf(out[n++], 300, "%d -> %s", fd, target);
  }
  closedir(d);
  return n;
}

// First half of e2e_ready: records the fd table and writes "<pid> <nonce>" to the
// temporary name "<path>.tmp" (returned in tmp), which a rename then publishes.
static inline void e2e_ready_prepare(const char* path, char* tmp, size_t tmp_size) {
  e2e_nfds = e2e_list_fds(e2e_fds, E2E_MAX_FDS);
  snprintf(tmp, tmp_size, "%s.tmp", path);
  FILE* f = fopen(tmp, "w");
  if (!f) e2e_fail("create %s: %s", tmp, strerror(errno));
  fprintf(f, "%d %016llx\n", (int)e2e_pid, e2e_nonce);
  if (fclose(f) != 0) e2e_fail("write %s: %s", tmp, strerror(errno));
}

// Creates the ready file atomically, so the driver never sees a half-made one.
static inline void e2e_ready(const char* path) {
  char tmp[4096];
  e2e_ready_prepare(path, tmp, sizeof tmp);
  if (rename(tmp, path) != 0) e2e_fail("rename %s: %s", tmp, strerror(errno));
}

// Checks what every program expects of itself after a restore, then exits 0.
__attribute__((noreturn)) static inline void e2e_done(void) {
  if (getpid() != e2e_pid && !e2e_new_pid_ok)
    e2e_fail("pid changed from %d to %d", (int)e2e_pid, (int)getpid());
  if (e2e_nfds >= 0) {
    static char now[E2E_MAX_FDS][300];
    int n = e2e_list_fds(now, E2E_MAX_FDS);
    // Both lists come from readdir of the same kind of table: compare as sets.
    for (int i = 0; i < e2e_nfds; i++) {
      int found = 0;
      for (int j = 0; j < n && !found; j++) found = strcmp(e2e_fds[i], now[j]) == 0;
      if (!found) e2e_fail("fd \"%s\" open at ready time is gone or changed", e2e_fds[i]);
    }
    for (int j = 0; j < n; j++) {
      int found = 0;
      for (int i = 0; i < e2e_nfds && !found; i++) found = strcmp(e2e_fds[i], now[j]) == 0;
      if (!found) e2e_fail("fd \"%s\" was not open at ready time", now[j]);
    }
  }
  printf("done %d %016llx\n", (int)e2e_pid, e2e_nonce);
  if (fflush(stdout) != 0) e2e_fail("write to stdout: %s", strerror(errno));
  exit(0);
}
