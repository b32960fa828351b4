// fd_event READY: eventfd, timerfd, signalfd and epoll across a checkpoint.
// Before ready:
//   eventfd E1 counter 42 (O_NONBLOCK); E2 EFD_SEMAPHORE counter 3; E3 a
//     counter above 2^32
//   timerfd T1 CLOCK_MONOTONIC, every 50 ms (keeps firing); T2 relative,
//     1000 s away; T3 CLOCK_REALTIME absolute deadline 100 s away; T4 one-shot
//     that already expired once, not read (one unread tick)
//   signalfd S for SIGUSR1 (SIGUSR1 and SIGUSR2 blocked)
//   epoll P over E1 (EPOLLIN, data 0x1111), T1 (EPOLLIN|EPOLLET, data
//     0xfeedface12345678), S (EPOLLIN, data 0x5555) and E2 (EPOLLIN|
//     EPOLLONESHOT, data 0x2222)
// then waits ~3 s (the driver checkpoints, kills and restores meanwhile) and
// checks every counter, timer setting, the signal mask of S, and the epoll
// interest list through epoll_wait's data fields and EPOLL_CTL_MOD.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>

#include "e2e.h"

#define HOLD_MS 3000
#define BIG_COUNT 0x123456789abULL

static double ts_sec(struct timespec t) {
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t read_u64(int fd, const char* what) {
  uint64_t v = 0;
  if (read(fd, &v, 8) != 8) e2e_fail("%s: read: %s", what, strerror(errno));
  return v;
}

static void expect_eagain(int fd, const char* what) {
  uint64_t v;
  if (read(fd, &v, 8) != -1 || errno != EAGAIN) e2e_fail("%s: more to read than expected", what);
}

// Collects the data fields epoll_wait reports within `ms`.
static int wait_data(int ep, uint64_t* out, int max, int ms) {
  struct epoll_event ev[16];
  int n = epoll_wait(ep, ev, max < 16 ? max : 16, ms);
  if (n < 0) e2e_fail("epoll_wait: %s", strerror(errno));
  for (int i = 0; i < n; i++) out[i] = ev[i].data.u64;
  return n;
}

static int has(const uint64_t* d, int n, uint64_t v) {
  for (int i = 0; i < n; i++)
    if (d[i] == v) return 1;
  return 0;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");

  int e1 = eventfd(42, EFD_NONBLOCK);
  int e2 = eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK);
  int e3 = eventfd(0, EFD_NONBLOCK);
  uint64_t big = BIG_COUNT;
  if (e1 < 0 || e2 < 0 || e3 < 0 || write(e3, &big, 8) != 8)
    e2e_fail("eventfd: %s", strerror(errno));

  int t1 = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  int t2 = timerfd_create(CLOCK_MONOTONIC, 0);
  int t3 = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
  int t4 = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  if (t1 < 0 || t2 < 0 || t3 < 0 || t4 < 0) e2e_fail("timerfd_create: %s", strerror(errno));
  struct itimerspec every50 = {{0, 50000000}, {0, 50000000}};
  struct itimerspec far = {{0, 0}, {1000, 0}};
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const double deadline = (double)now.tv_sec + 100;
  struct itimerspec absolute = {{0, 0}, {now.tv_sec + 100, 0}};
  struct itimerspec soon = {{0, 0}, {0, 1000000}};
  if (timerfd_settime(t1, 0, &every50, NULL) || timerfd_settime(t2, 0, &far, NULL) ||
      timerfd_settime(t3, TFD_TIMER_ABSTIME, &absolute, NULL) ||
      timerfd_settime(t4, 0, &soon, NULL))
    e2e_fail("timerfd_settime: %s", strerror(errno));

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR1);
  sigaddset(&mask, SIGUSR2);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  sigset_t only1;
  sigemptyset(&only1);
  sigaddset(&only1, SIGUSR1);
  int s = signalfd(-1, &only1, SFD_NONBLOCK);
  if (s < 0) e2e_fail("signalfd: %s", strerror(errno));

  int ep = epoll_create1(0);
  struct epoll_event ev;
  ev.events = EPOLLIN;
  ev.data.u64 = 0x1111;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, e1, &ev)) e2e_fail("epoll_ctl e1: %s", strerror(errno));
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = 0xfeedface12345678ULL;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, t1, &ev)) e2e_fail("epoll_ctl t1: %s", strerror(errno));
  ev.events = EPOLLIN;
  ev.data.u64 = 0x5555;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev)) e2e_fail("epoll_ctl s: %s", strerror(errno));
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = 0x2222;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, e2, &ev)) e2e_fail("epoll_ctl e2: %s", strerror(errno));

  e2e_sleep_ms(20);  // t4 expires once
  if (e2e_sabotage()) {
    uint64_t one = 1;
    if (write(e1, &one, 8) != 8) e2e_fail("sabotage write");
  }
  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);

  // The epoll interest list, by the data fields it reports: E1 and E2 are
  // readable, T1 fires within 50 ms, S once SIGUSR1 is pending.
  uint64_t d[256];
  int n = 0;
  for (int tries = 0; tries < 20 && !(has(d, n, 0xfeedface12345678ULL) && has(d, n, 0x2222));
       tries++)
    n += wait_data(ep, d + n, 16, 100);
  if (!has(d, n, 0x1111)) e2e_fail("epoll: E1 (data 0x1111) not reported");
  if (!has(d, n, 0x2222)) e2e_fail("epoll: E2 (one-shot, data 0x2222) not reported");
  if (!has(d, n, 0xfeedface12345678ULL))
    e2e_fail("epoll: T1 (data 0xfeedface12345678) not reported");
  if (has(d, n, 0x5555)) e2e_fail("epoll: S reported with no signal pending");
  for (int i = 0; i < n; i++)
    if (d[i] != 0x1111 && d[i] != 0x2222 && d[i] != 0x5555 && d[i] != 0xfeedface12345678ULL)
      e2e_fail("epoll: unknown data 0x%llx", (unsigned long long)d[i]);
  // Registered under the same fd numbers: MOD works for them, not for others.
  ev.events = EPOLLIN;
  ev.data.u64 = 0x1111;
  if (epoll_ctl(ep, EPOLL_CTL_MOD, e1, &ev) != 0) e2e_fail("epoll: E1 not registered as fd %d", e1);
  if (epoll_ctl(ep, EPOLL_CTL_MOD, e3, &ev) != -1 || errno != ENOENT)
    e2e_fail("epoll: E3 registered but never was");

  // Signalfd: only SIGUSR1 goes through it; the mask stayed blocked.
  kill(getpid(), SIGUSR1);
  n = 0;
  for (int tries = 0; tries < 10 && !has(d, n, 0x5555); tries++) n += wait_data(ep, d + n, 16, 100);
  if (!has(d, n, 0x5555)) e2e_fail("epoll: S (data 0x5555) not reported with SIGUSR1 pending");
  struct signalfd_siginfo si;
  if (read(s, &si, sizeof si) != sizeof si || si.ssi_signo != SIGUSR1)
    e2e_fail("signalfd: did not read SIGUSR1");
  kill(getpid(), SIGUSR2);
  if (read(s, &si, sizeof si) != -1 || errno != EAGAIN)
    e2e_fail("signalfd: reads SIGUSR2, which is not in its mask");
  struct timespec zero = {0, 0};
  if (sigtimedwait(&mask, NULL, &zero) != SIGUSR2) e2e_fail("SIGUSR2 was not pending");

  // Eventfds.
  uint64_t v = read_u64(e1, "E1");
  if (v != 42) e2e_fail("E1: counter %llu, expected 42", (unsigned long long)v);
  expect_eagain(e1, "E1");
  for (int i = 0; i < 3; i++)
    if ((v = read_u64(e2, "E2")) != 1) e2e_fail("E2: semaphore read %llu", (unsigned long long)v);
  expect_eagain(e2, "E2");
  if ((v = read_u64(e3, "E3")) != BIG_COUNT) e2e_fail("E3: counter 0x%llx", (unsigned long long)v);

  // Timers.
  struct itimerspec cur;
  timerfd_gettime(t1, &cur);
  if (cur.it_interval.tv_sec != 0 || cur.it_interval.tv_nsec != 50000000)
    e2e_fail("T1: interval %.3f s, expected 0.050", ts_sec(cur.it_interval));
  read_u64(t1, "T1");  // whatever accumulated; the next expiry is < 50 ms away
  double t0 = e2e_now(), t_end;
  uint64_t ticks = 0;
  do {
    uint64_t k;
    e2e_sleep_ms(10);
    if (read(t1, &k, 8) == 8) ticks += k;
    t_end = e2e_now();
  } while (t_end - t0 < 0.5);
  // Still firing every 50 ms: 20 per second, give or take one expiry.
  double rate = (double)ticks / (t_end - t0);
  if (rate < 14 || rate > 26) e2e_fail("T1: %.1f expirations per second, expected 20", rate);
  timerfd_gettime(t2, &cur);
  if (ts_sec(cur.it_value) > 1000 || ts_sec(cur.it_value) < 950 || cur.it_interval.tv_sec)
    e2e_fail("T2: %.3f s left, expected just under 1000", ts_sec(cur.it_value));
  timerfd_gettime(t3, &cur);
  clock_gettime(CLOCK_REALTIME, &now);
  double left = deadline - ts_sec(now);
  if (ts_sec(cur.it_value) < left - 1 || ts_sec(cur.it_value) > left + 1)
    e2e_fail("T3: %.3f s left, the absolute deadline says %.3f", ts_sec(cur.it_value), left);
  if ((v = read_u64(t4, "T4")) != 1)
    e2e_fail("T4: %llu unread expirations, expected 1", (unsigned long long)v);
  timerfd_gettime(t4, &cur);
  if (cur.it_value.tv_sec || cur.it_value.tv_nsec) e2e_fail("T4: re-armed after restore");
  e2e_done();
}
