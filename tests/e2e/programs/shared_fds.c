// shared_fds READY WORKDIR [ROUNDS]: a parent and a child sharing, from
// before the fork, an eventfd E, a timerfd T, a signalfd S (SIGUSR1, blocked
// in both) and an epoll set EP watching a pipe P and E, for cr_full --tree
// (job.sh with E2E_JOB_PROG=shared_fds E2E_JOB_PROCS=2). After the fork the
// child also registers, in the shared EP, the read end of a pipe of its own
// at fd 60 (a number the parent does not have). Each round the parent
// changes the shared objects and the child must see the change through its
// own descriptors (one open file description each, not copies):
//   parent: T's interval := (r % 5 + 1) * 10 ms (timerfd_settime); S's mask
//           gets SIGUSR2 on odd rounds (signalfd on S); P's registration in
//           EP gets data 100 + r % 2 (EPOLL_CTL_MOD); E += r; SIGUSR1 to the
//           child; r into P;
//   child:  writes a byte into its own pipe, then epoll_wait on EP until it
//           reported P (with this round's data), E (data 2) and its pipe
//           (data 3); reads r from P and r from E, SIGUSR1 from the parent's
//           PID on S, checks T's interval and S's mask (fdinfo), then sends
//           SIGUSR1 to the parent and r on a pipe back;
//   parent: reads r back and, on S, SIGUSR1 from the child's PID.
// The parent sleeps 10 ms per round, so a checkpoint finds every state.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#include "e2e.h"

static long nrounds = 300;

static void io_all(int fd, void* buf, size_t len, int out, const char* what) {
  char* p = buf;
  while (len > 0) {
    ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) e2e_fail("%s: %s", what, n == 0 ? "end of file" : strerror(errno));
    p += n;
    len -= (size_t)n;
  }
}

static long interval_ms(long r) {
  return (r % 5 + 1) * 10;
}

// The signal mask S shows in /proc/self/fdinfo (hex, bit N-1 = signal N).
static unsigned long long fd_sigmask(int fd) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
  int f = open(path, O_RDONLY);
  ssize_t n = f < 0 ? -1 : read(f, buf, sizeof buf - 1);
  if (f >= 0) close(f);
  if (n <= 0) e2e_fail("reading %s", path);
  buf[n] = '\0';
  char* m = strstr(buf, "sigmask:");
  if (!m) e2e_fail("no sigmask in %s", path);
  return strtoull(m + 8, NULL, 16);
}

static void expect_signal(int s, pid_t from, long r, const char* who) {
  struct signalfd_siginfo si;
  ssize_t n;
  do n = read(s, &si, sizeof si);
  while (n < 0 && errno == EINTR);
  if (n != sizeof si) e2e_fail("%s: reading S in round %ld: %s", who, r, strerror(errno));
  if (si.ssi_signo != SIGUSR1 || (pid_t)si.ssi_pid != from)
    e2e_fail("%s: S gave signal %u from PID %u in round %ld, expected SIGUSR1 from %d", who,
             si.ssi_signo, si.ssi_pid, r, (int)from);
}

static void child(int e, int t, int s, int ep, int p_r, int back_w, pid_t parent) {
  int q[2];
  if (pipe(q) != 0 || dup2(q[0], 60) != 60) e2e_fail("child: pipe: %s", strerror(errno));
  close(q[0]);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 3};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, 60, &ev) != 0) e2e_fail("child: epoll_ctl: %s", strerror(errno));
  io_all(back_w, "k", 1, 1, "child: hello");
  for (long r = 1; r <= nrounds; r++) {
    io_all(q[1], "q", 1, 1, "child: own pipe");
    int seen_p = 0, seen_e = 0, seen_q = 0;
    double until = e2e_now() + 20;
    while (!(seen_p && seen_e && seen_q)) {
      if (e2e_now() > until)
        e2e_fail("child: round %ld: epoll reported pipe %d, eventfd %d, own pipe %d", r, seen_p,
                 seen_e, seen_q);
      struct epoll_event got[8];
      int n = epoll_wait(ep, got, 8, 100);
      if (n < 0 && errno != EINTR) e2e_fail("child: epoll_wait: %s", strerror(errno));
      for (int i = 0; i < n; i++) {
        uint64_t d = got[i].data.u64;
        if (d == (uint64_t)(100 + r % 2))
          seen_p = 1;
        else if (d == 2)
          seen_e = 1;
        else if (d == 3)
          seen_q = 1;
        else if (d != (uint64_t)(100 + (r + 1) % 2))  // last round's data, still level-triggered
          e2e_fail("child: round %ld: epoll reported unknown data %llu", r, (unsigned long long)d);
      }
    }
    long got_r;
    io_all(p_r, &got_r, sizeof got_r, 0, "child: reading P");
    if (got_r != r) e2e_fail("child: P gave round %ld in round %ld", got_r, r);
    uint64_t v;
    if (read(e, &v, 8) != 8 || v != (uint64_t)r)
      e2e_fail("child: E read %llu in round %ld (not the parent's eventfd?)", (unsigned long long)v,
               r);
    char b;
    io_all(60, &b, 1, 0, "child: own pipe");
    expect_signal(s, parent, r, "child");
    struct itimerspec its;
    if (timerfd_gettime(t, &its) != 0 || its.it_interval.tv_nsec != interval_ms(r) * 1000000 ||
        its.it_interval.tv_sec != 0)
      e2e_fail("child: T's interval is %ld ns in round %ld, the parent set %ld ms",
               (long)its.it_interval.tv_nsec, r, interval_ms(r));
    unsigned long long want = 1ull << (SIGUSR1 - 1) | (r % 2 ? 1ull << (SIGUSR2 - 1) : 0);
    if (fd_sigmask(s) != want) e2e_fail("child: S's mask is %llx in round %ld", fd_sigmask(s), r);
    kill(parent, SIGUSR1);
    io_all(back_w, &r, sizeof r, 1, "child: answering");
  }
  exit(0);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 3, "READY WORKDIR [ROUNDS]");
  if (argc > 3) nrounds = atol(argv[3]);
  sigset_t m;
  sigemptyset(&m);
  sigaddset(&m, SIGUSR1);
  sigaddset(&m, SIGUSR2);
  sigprocmask(SIG_BLOCK, &m, NULL);
  sigdelset(&m, SIGUSR2);
  int e = eventfd(0, EFD_NONBLOCK);
  int t = timerfd_create(CLOCK_MONOTONIC, 0);
  int s = signalfd(-1, &m, 0);
  int ep = epoll_create1(0);
  int p[2], back[2];
  if (e < 0 || t < 0 || s < 0 || ep < 0 || pipe(p) || pipe(back))
    e2e_fail("setup: %s", strerror(errno));
  struct itimerspec its = {{0, 10 * 1000000}, {0, 10 * 1000000}};
  timerfd_settime(t, 0, &its, NULL);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 100};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev)) e2e_fail("epoll_ctl: %s", strerror(errno));
  ev.data.u64 = 2;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, e, &ev)) e2e_fail("epoll_ctl: %s", strerror(errno));
  fflush(NULL);
  pid_t parent = getpid(), c = fork();
  if (c < 0) e2e_fail("fork: %s", strerror(errno));
  if (c == 0) {
    e2e_name = "shared_fds (child)";
    close(p[1]), close(back[0]);
    child(e, t, s, ep, p[0], back[1], parent);
  }
  close(back[1]);
  char hello;
  io_all(back[0], &hello, 1, 0, "parent: hello");
  e2e_ready(argv[1]);
  for (long r = 1; r <= nrounds; r++) {
    its.it_interval.tv_nsec = its.it_value.tv_nsec = interval_ms(r) * 1000000;
    if (timerfd_settime(t, 0, &its, NULL) != 0) e2e_fail("timerfd_settime: %s", strerror(errno));
    sigset_t sm = m;
    if (r % 2) sigaddset(&sm, SIGUSR2);
    if (signalfd(s, &sm, 0) != s) e2e_fail("signalfd on S: %s", strerror(errno));
    ev.data.u64 = 100 + r % 2;
    if (epoll_ctl(ep, EPOLL_CTL_MOD, p[0], &ev)) e2e_fail("EPOLL_CTL_MOD: %s", strerror(errno));
    uint64_t v = (uint64_t)r;
    if (write(e, &v, 8) != 8) e2e_fail("writing E: %s", strerror(errno));
    kill(c, SIGUSR1);
    io_all(p[1], &r, sizeof r, 1, "parent: writing P");
    e2e_pace(10);
    long got;
    io_all(back[0], &got, sizeof got, 0, "parent: reading the answer");
    if (got != r) e2e_fail("parent: answer %ld in round %ld", got, r);
    expect_signal(s, c, r, "parent");
  }
  int status;
  if (waitpid(c, &status, 0) != c || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    e2e_fail("child failed (status 0x%x)", status);
  e2e_done();
}
