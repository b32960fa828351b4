// identity READY [split|mempolicy|nothp]: a process whose credentials and scheduling are
// whatever it was started with (the driver wraps it in setpriv, nice,
// taskset, chrt); with "split", run as root, a second thread gives itself
// other credentials and scheduling with raw system calls (they are per
// thread in the kernel). Both threads write their securebits to READY.bits
// ("TID BITS" lines; /proc has no securebits), then the process signals
// ready and waits until READY.go exists. Then both write their securebits
// again to READY.bits2, the main thread tries to open /etc/shadow and
// writes "shadow readable" or "shadow denied" to READY.result, and it exits 0.
// "mempolicy" (a preferred-node memory policy on the main thread) and
// "nothp" (PR_SET_THP_DISABLE) set state a checkpoint must refuse.
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "e2e.h"

static const char* ready;
static volatile int phase;  // 0 setup, 1 thread set up, 2 go seen, 3 thread wrote its bits

static void append(const char* suffix, const char* line) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", ready, suffix);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line))
    e2e_fail("writing %s: %s", path, strerror(errno));
  close(fd);
}

static void write_bits(const char* suffix) {
  char line[64];
  snprintf(line, sizeof line, "%ld %lx\n", (long)syscall(SYS_gettid),
           (unsigned long)prctl(PR_GET_SECUREBITS));
  append(suffix, line);
}

static void nap(void) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static void* other(void* arg) {
  if (arg) {
    // Raw calls: glibc's setresuid() would change every thread.
    gid_t groups[] = {1234, 1235};
    if (syscall(SYS_setgroups, 2, groups) != 0 || syscall(SYS_setresgid, 1234, 1234, 1234) != 0 ||
        syscall(SYS_setresuid, 4321, 4321, 4321) != 0)
      e2e_fail("thread credentials: %s", strerror(errno));
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 7) != 0)
      e2e_fail("thread nice: %s", strerror(errno));
  }
  write_bits(".bits");
  phase = 1;
  while (phase < 2) nap();
  write_bits(".bits2");
  phase = 3;
  for (;;) nap();
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY [split]");
  ready = argv[1];
  const char* mode = argc > 2 ? argv[2] : "";
  int split = strcmp(mode, "split") == 0;
  if (strcmp(mode, "mempolicy") == 0) {
    unsigned long node0 = 1;
    if (syscall(SYS_set_mempolicy, 1 /* MPOL_PREFERRED */, &node0, 8 * sizeof node0) != 0)
      e2e_fail("set_mempolicy: %s", strerror(errno));
  } else if (strcmp(mode, "nothp") == 0) {
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
      e2e_fail("PR_SET_THP_DISABLE: %s", strerror(errno));
  } else if (*mode && !split) {
    e2e_fail("unknown mode %s", mode);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, other, split ? (void*)1 : NULL) != 0) e2e_fail("pthread_create");
  while (phase < 1) nap();
  write_bits(".bits");
  e2e_ready(ready);

  char go[4096];
  snprintf(go, sizeof go, "%s.go", ready);
  for (int i = 0; access(go, F_OK) != 0; i++) {
    if (i > 60 * 50) e2e_fail("no %s within 60 s", go);
    nap();
  }
  write_bits(".bits2");
  phase = 2;
  while (phase < 3) nap();
  int fd = open("/etc/shadow", O_RDONLY);
  append(".result", fd >= 0 ? "shadow readable\n" : "shadow denied\n");
  if (fd >= 0) close(fd);
  printf("done %d %016llx\n", (int)e2e_pid, e2e_nonce);
  return 0;
}
