// seccomp_filter READY: installs two seccomp filters with libseccomp (each
// makes one system call fail with its own errno), then waits. At the end,
// with the same threads, both filters must still be in force, in the same
// number, and everything else must still be allowed.
#include "e2e.h"

#include <sched.h>
#include <seccomp.h>
#include <sys/syscall.h>

static void add_filter(int syscall_nr, int err) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) e2e_fail("seccomp_init failed");
  if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), syscall_nr, 0) != 0) e2e_fail("seccomp_rule_add");
  if (seccomp_load(ctx) != 0) e2e_fail("seccomp_load failed");
  seccomp_release(ctx);
}

static int status_field(const char* key) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) e2e_fail("open /proc/self/status");
  char line[256];
  int v = -1;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ':') v = atoi(line + n + 1);
  fclose(f);
  return v;
}

static void check(void) {
  errno = 0;
  if (sched_getscheduler(0) != -1 || errno != 77)
    e2e_fail("sched_getscheduler not filtered (errno %d)", errno);
  errno = 0;
  if (syscall(SYS_getpgid, 0) != -1 || errno != 78)
    e2e_fail("getpgid not filtered (errno %d)", errno);
  if (getppid() <= 0) e2e_fail("getppid broken");
  if (status_field("Seccomp") != 2) e2e_fail("seccomp mode is %d", status_field("Seccomp"));
  if (status_field("Seccomp_filters") != 2)
    e2e_fail("%d seccomp filters, expected 2", status_field("Seccomp_filters"));
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  add_filter(SCMP_SYS(sched_getscheduler), 77);
  add_filter(SCMP_SYS(getpgid), e2e_sabotage() ? 79 : 78);
  e2e_ready(argv[1]);
  e2e_sleep_ms(2000);  // two incrementals fit in here on a loaded machine
  check();
  e2e_done();
}
