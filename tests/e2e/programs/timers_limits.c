// timers_limits READY: an interval timer (setitimer) and a POSIX timer
// (timer_create, a signal with a value) both firing every 20 ms, a one-shot
// POSIX timer set far ahead, changed resource limits, a personality flag and
// prctl state (name, dumpable, parent-death signal, no_new_privs). After
// ready it counts ticks in 200 ms slices: both timers must fire in every slice,
// before and after the restore;
// the one-shot timer still has its time left, and every limit and flag reads
// back as set.
#include "e2e.h"

#include <signal.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>

#define TICK_MS 20
#define TIMER_SIG (SIGRTMIN + 1)

static volatile sig_atomic_t alarms, posix_ticks, bad_value;

static void on_alarm(int sig) {
  (void)sig;
  alarms++;
}

static void on_timer(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)uc;
  if (si->si_value.sival_int != 1234 || si->si_code != SI_TIMER) bad_value = 1;
  posix_ticks++;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  sa.sa_sigaction = on_timer;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(TIMER_SIG, &sa, NULL);

  struct itimerval it = {{0, TICK_MS * 1000}, {0, TICK_MS * 1000}};
  if (setitimer(ITIMER_REAL, &it, NULL) != 0) e2e_fail("setitimer: %s", strerror(errno));
  // A placeholder first, so the timer under test does not have ID 0.
  timer_t first, ticker, oneshot;
  struct sigevent none = {.sigev_notify = SIGEV_NONE};
  if (timer_create(CLOCK_MONOTONIC, &none, &first) != 0) e2e_fail("timer_create");
  struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = TIMER_SIG};
  ev.sigev_value.sival_int = 1234;
  if (timer_create(CLOCK_MONOTONIC, &ev, &ticker) != 0)
    e2e_fail("timer_create: %s", strerror(errno));
  struct itimerspec its = {{0, TICK_MS * 1000000L}, {0, TICK_MS * 1000000L}};
  if (timer_settime(ticker, 0, &its, NULL) != 0) e2e_fail("timer_settime");
  if (timer_create(CLOCK_REALTIME, &none, &oneshot) != 0) e2e_fail("timer_create");
  struct itimerspec far = {{0, 0}, {3600, 0}};
  if (timer_settime(oneshot, 0, &far, NULL) != 0) e2e_fail("timer_settime");
  if (timer_delete(first) != 0) e2e_fail("timer_delete");

  struct rlimit nofile = {200, 300}, core = {0, 4096}, stack;
  if (setrlimit(RLIMIT_NOFILE, &nofile) || setrlimit(RLIMIT_CORE, &core))
    e2e_fail("setrlimit: %s", strerror(errno));
  getrlimit(RLIMIT_STACK, &stack);
  if (e2e_sabotage()) nofile.rlim_cur = 199;
  personality(PER_LINUX | ADDR_NO_RANDOMIZE);
  prctl(PR_SET_NAME, "tl-worker");
  prctl(PR_SET_DUMPABLE, 0);
  prctl(PR_SET_PDEATHSIG, SIGWINCH);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  signal(SIGWINCH, SIG_IGN);  // parent death after a restore must not end the test

  e2e_sleep_ms(200);
  e2e_ready(argv[1]);
  // The checkpoint (and the restore) happen during these slices: both timers
  // must tick in every one of them, so also after a restore.
  for (int slice = 0; slice < 10; slice++) {
    int a0 = alarms, p0 = posix_ticks;
    e2e_sleep_ms(200);
    if (alarms - a0 < 3) e2e_fail("interval timer stopped: %d ticks in 200 ms", alarms - a0);
    if (posix_ticks - p0 < 3) e2e_fail("POSIX timer stopped: %d ticks in 200 ms", posix_ticks - p0);
  }
  if (bad_value) e2e_fail("POSIX timer signal lost its value or code");
  struct itimerspec left;
  if (timer_gettime(oneshot, &left) != 0) e2e_fail("one-shot timer gone: %s", strerror(errno));
  if (left.it_value.tv_sec < 3500 || left.it_value.tv_sec > 3600)
    e2e_fail("one-shot timer has %lds left", (long)left.it_value.tv_sec);
  if (timer_gettime(ticker, &left) != 0) e2e_fail("ticker timer ID changed");

  struct rlimit r;
  getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur != nofile.rlim_cur || r.rlim_max != 300)
    e2e_fail("RLIMIT_NOFILE %lu/%lu", r.rlim_cur, r.rlim_max);
  getrlimit(RLIMIT_CORE, &r);
  if (r.rlim_cur != 0 || r.rlim_max != 4096) e2e_fail("RLIMIT_CORE changed");
  getrlimit(RLIMIT_STACK, &r);
  if (r.rlim_cur != stack.rlim_cur || r.rlim_max != stack.rlim_max)
    e2e_fail("RLIMIT_STACK changed");
  if (!(personality(0xffffffff) & ADDR_NO_RANDOMIZE)) e2e_fail("personality flag lost");
  char name[17] = {0};
  prctl(PR_GET_NAME, name);
  if (strcmp(name, "tl-worker") != 0) e2e_fail("name is \"%s\"", name);
  if (prctl(PR_GET_DUMPABLE) != 0) e2e_fail("dumpable flag lost");
  int pdeath = 0;
  prctl(PR_GET_PDEATHSIG, &pdeath);
  if (pdeath != SIGWINCH) e2e_fail("parent-death signal is %d", pdeath);
  if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) e2e_fail("no_new_privs lost");
  struct itimerval stop = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &stop, NULL);
  e2e_done();
}
