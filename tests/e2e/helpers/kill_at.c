// kill_at PID STAGE DELAY_US CMD...: runs CMD (a cr_restart that recreates
// PID) as a child, kills it with SIGKILL once STAGE is reached plus DELAY_US
// microseconds, then checks that nothing is left holding PID.
//   STAGE fork:    PID exists (the restorer has just forked its child)
//   STAGE rebuild: PID no longer maps CMD's own executable (its address
//                  space is being rebuilt from the image)
//   STAGE self:    not killed here: CMD kills itself (preloaded
//                  kill_at_step.so, CKPT_KILL_AT_STEP); DELAY_US unused
// kill_at makes itself a child subreaper, so whatever CMD leaves behind is
// re-parented here (not to an init that may never reap it) and is reaped.
// Exit: 0 killed at STAGE and PID free within 5 s; 1 PID still held (its
// state is printed); 3 CMD ended before STAGE (nothing tested); 2 usage.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int read_text(const char* path, char* buf, size_t size) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  buf[n] = 0;
  return (int)n;
}

// The one-letter state of `pid` ('-' if there is none).
static char proc_state(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if (read_text(path, buf, sizeof buf) <= 0) return '-';
  char* close = strrchr(buf, ')');
  return close && close[1] == ' ' ? close[2] : '?';
}

static int reached(pid_t pid, const char* stage, const char* own_exe) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  if (strcmp(stage, "fork") == 0) return access(path, F_OK) == 0;
  static char maps[1 << 20];
  int n = read_text(path, maps, sizeof maps);
  return n > 0 && strstr(maps, own_exe) == NULL;
}

// `pid` runs, untraced, as something other than the restorer.
static int restored(pid_t pid, const char* own_exe) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  if (read_text(path, buf, sizeof buf) <= 0) return 0;
  char* t = strstr(buf, "TracerPid:");
  if (!t || atoi(t + 10) != 0) return 0;
  snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strcmp(buf, own_exe) != 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: kill_at PID fork|rebuild|self DELAY_US CMD...\n");
    return 2;
  }
  pid_t pid = atoi(argv[1]);
  const char* stage = argv[2];
  long delay_us = atol(argv[3]);
  char own_exe[4096];
  if (!realpath(argv[4], own_exe)) {
    perror(argv[4]);
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    perror("PR_SET_CHILD_SUBREAPER");
    return 2;
  }
  pid_t tool = fork();
  if (tool < 0) return 2;
  if (tool == 0) {
    execv(argv[4], argv + 4);
    _exit(126);
  }
  int st;
  int killed = 0;
  for (;;) {
    if (strcmp(stage, "self") == 0) {  // CMD kills itself (kill_at_step.so)
      waitpid(tool, &st, 0);
      killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
      break;
    }
    if (reached(pid, stage, own_exe)) {
      if (delay_us) usleep((useconds_t)delay_us);
      killed = kill(tool, SIGKILL) == 0;
      break;
    }
    if (waitpid(tool, &st, WNOHANG) == tool) break;
  }
  if (killed && strcmp(stage, "self") != 0) waitpid(tool, &st, 0);
  if (!killed || !WIFSIGNALED(st)) {
    // Finished on its own: let a restored process end, reap it, report.
    while (wait(NULL) > 0) {
    }
    fprintf(stderr, "kill_at: %s ended before stage %s\n", argv[4], stage);
    return 3;
  }
  // Orphans come to us: reap them while waiting for PID to disappear.
  double deadline = now() + 5;
  char s;
  while ((s = proc_state(pid)) != '-' && now() < deadline) {
    while (waitpid(-1, NULL, WNOHANG | __WALL) > 0) {
    }
    usleep(2000);
  }
  if (s != '-' && s != 't' && s != 'T' && restored(pid, own_exe)) {
    // The restore had completed: a running, untraced process is what a
    // restorer killed after its work leaves behind.
    kill(pid, SIGKILL);
    while (waitpid(-1, NULL, __WALL) > 0) {
    }
    fprintf(stderr, "kill_at: the restore had completed before the kill at %s+%ldus\n", stage,
            delay_us);
    return 3;
  }
  if (s != '-') {
    fprintf(stderr, "kill_at: PID %d left in state %c after the restorer was killed at %s+%ldus\n",
            (int)pid, s, stage, delay_us);
    kill(pid, SIGKILL);
    while (waitpid(-1, NULL, __WALL) > 0) {
    }
    return 1;
  }
  return 0;
}
