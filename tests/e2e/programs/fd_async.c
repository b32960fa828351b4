// fd_async READY: signal-driven I/O (O_ASYNC) across a checkpoint.
// Before ready:
//   a socketpair whose fd 3 has O_ASYNC, F_SETOWN = this process, and the
//     default signal (SIGIO);
//   a pipe whose read end, fd 5, has O_ASYNC, F_SETOWN_EX = this thread
//     (F_OWNER_TID) and F_SETSIG = SIGRTMIN+1, so the signal carries si_fd;
// each is tested once: a byte written to the other end must bring its
// signal. Then it waits ~2 s (the driver checkpoints, kills and restores
// meanwhile), checks F_GETFL, F_GETOWN_EX and F_GETSIG, writes again and
// expects both signals again, with si_fd 5 and si_code POLL_IN for the pipe.
// Sabotage: O_ASYNC is turned off on the socket before ready.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "e2e.h"

#define HOLD_MS 2000

static volatile sig_atomic_t sigio_count, rt_count, rt_fd = -1, rt_code;

static void on_sigio(int sig) {
  (void)sig;
  sigio_count++;
}

static void on_rt(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)uc;
  rt_count++;
  rt_fd = si->si_fd;
  rt_code = si->si_code;
}

// Writes a byte to `wr` and waits until `count` reaches `want` (1 s at most).
static void poke(int wr, int rd, volatile sig_atomic_t* count, int want, const char* what) {
  if (write(wr, "x", 1) != 1) e2e_fail("%s: write: %s", what, strerror(errno));
  double end = e2e_now() + 1.0;
  while (*count < want && e2e_now() < end) e2e_sleep_ms(5);
  if (*count < want) e2e_fail("%s: no signal after a write (%d of %d)", what, (int)*count, want);
  char c;
  if (read(rd, &c, 1) != 1) e2e_fail("%s: read: %s", what, strerror(errno));
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  const int rt = SIGRTMIN + 1;
  struct sigaction sa = {.sa_handler = on_sigio};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGIO, &sa, NULL) != 0) e2e_fail("sigaction: %s", strerror(errno));
  struct sigaction sr = {.sa_sigaction = on_rt, .sa_flags = SA_SIGINFO};
  sigemptyset(&sr.sa_mask);
  if (sigaction(rt, &sr, NULL) != 0) e2e_fail("sigaction: %s", strerror(errno));

  for (int fd = 3; fd <= 6; fd++) close(fd);
  int sv[2], p[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || sv[0] != 3) e2e_fail("socketpair at fd 3");
  if (pipe(p) != 0 || p[0] != 5) e2e_fail("pipe at fd 5");
  if (fcntl(sv[0], F_SETOWN, getpid()) != 0 || fcntl(sv[0], F_SETFL, O_ASYNC | O_NONBLOCK) != 0)
    e2e_fail("socket O_ASYNC: %s", strerror(errno));
  struct f_owner_ex me = {.type = F_OWNER_TID, .pid = (pid_t)syscall(SYS_gettid)};
  if (fcntl(p[0], F_SETOWN_EX, &me) != 0 || fcntl(p[0], F_SETSIG, rt) != 0 ||
      fcntl(p[0], F_SETFL, O_ASYNC) != 0)
    e2e_fail("pipe O_ASYNC: %s", strerror(errno));
  poke(sv[1], sv[0], &sigio_count, 1, "socket before the checkpoint");
  poke(p[1], p[0], &rt_count, 1, "pipe before the checkpoint");
  if (e2e_sabotage()) fcntl(sv[0], F_SETFL, O_NONBLOCK);
  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);
  e2e_hold();

  if (!(fcntl(sv[0], F_GETFL) & O_ASYNC) || !(fcntl(p[0], F_GETFL) & O_ASYNC))
    e2e_fail("O_ASYNC is off");
  struct f_owner_ex o;
  if (fcntl(sv[0], F_GETOWN_EX, &o) != 0 || o.type != F_OWNER_PID || o.pid != getpid())
    e2e_fail("socket owner: type %d pid %d, expected this process", o.type, o.pid);
  if (fcntl(p[0], F_GETOWN_EX, &o) != 0 || o.type != F_OWNER_TID || o.pid != me.pid)
    e2e_fail("pipe owner: type %d pid %d, expected thread %d", o.type, o.pid, me.pid);
  if (fcntl(p[0], F_GETSIG) != rt) e2e_fail("pipe F_GETSIG is %d", fcntl(p[0], F_GETSIG));
  poke(sv[1], sv[0], &sigio_count, 2, "socket after the checkpoint");
  rt_fd = -1;
  poke(p[1], p[0], &rt_count, 2, "pipe after the checkpoint");
  if (rt_fd != 5 || rt_code != POLL_IN)
    e2e_fail("pipe signal: si_fd %d si_code %d, expected 5 and POLL_IN", (int)rt_fd, (int)rt_code);
  e2e_done();
}
