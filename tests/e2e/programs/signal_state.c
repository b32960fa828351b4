// signal_state READY: signal handlers with their flags, blocked masks, and
// signals queued (with their siginfo) when the checkpoint is taken, for the
// process and for one thread. After ready the program waits; then it checks
// every disposition reads back as installed, unblocks the queued signals and
// checks each handler ran once with the value it was sent with, on the
// alternate stack where SA_ONSTACK asked for it.
#include "e2e.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

#define SIG_PROC SIGUSR1           // queued for the process, with a value
#define SIG_THREAD (SIGRTMIN + 3)  // queued for the worker thread only
#define SIG_ONSTACK SIGUSR2        // raised later; its handler must run on the alt stack

static volatile sig_atomic_t got_proc, got_thread, got_onstack;
static volatile int proc_value, thread_value, proc_code;
static volatile pid_t thread_handler_tid;
static char altstack[64 * 1024];
static volatile int on_altstack;

static void on_proc(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)uc;
  got_proc++;
  proc_value = si->si_value.sival_int;
  proc_code = si->si_code;
}

static void on_thread(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)uc;
  got_thread++;
  thread_value = si->si_value.sival_int;
  thread_handler_tid = (pid_t)syscall(SYS_gettid);
}

static void on_stack(int sig) {
  (void)sig;
  char here;
  on_altstack = &here >= altstack && &here < altstack + sizeof altstack;
  got_onstack++;
}

static void install(int sig, void* handler, int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  if (flags & SA_SIGINFO)
    sa.sa_sigaction = (void (*)(int, siginfo_t*, void*))handler;
  else
    sa.sa_handler = (void (*)(int))handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGHUP);  // a handler mask to check too
  if (sigaction(sig, &sa, NULL) != 0) e2e_fail("sigaction %d: %s", sig, strerror(errno));
}

static void check_action(int sig, void* handler, int flags) {
  struct sigaction sa;
  if (sigaction(sig, NULL, &sa) != 0) e2e_fail("sigaction read %d", sig);
  void* h = (flags & SA_SIGINFO) ? (void*)sa.sa_sigaction : (void*)sa.sa_handler;
  if (h != handler) e2e_fail("signal %d: handler changed", sig);
  if ((sa.sa_flags & flags) != flags)
    e2e_fail("signal %d: flags %#x lost (%#x)", sig, flags, sa.sa_flags);
  if (!sigismember(&sa.sa_mask, SIGHUP)) e2e_fail("signal %d: handler mask lost", sig);
}

static pid_t worker_tid;
static volatile int worker_go;

static void* worker(void* arg) {
  (void)arg;
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIG_THREAD);
  pthread_sigmask(SIG_BLOCK, &block, NULL);  // queued here until unblocked
  worker_tid = (pid_t)syscall(SYS_gettid);
  while (!worker_go) e2e_sleep_ms(5);
  pthread_sigmask(SIG_UNBLOCK, &block, NULL);
  return NULL;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
  if (sigaltstack(&ss, NULL) != 0) e2e_fail("sigaltstack: %s", strerror(errno));
  install(SIG_PROC, on_proc, SA_SIGINFO | SA_RESTART);
  install(SIG_THREAD, on_thread, SA_SIGINFO);
  install(SIG_ONSTACK, on_stack, SA_ONSTACK | SA_NODEFER);
  signal(SIGPIPE, SIG_IGN);

  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIG_PROC);
  sigaddset(&block, SIG_THREAD);
  pthread_sigmask(SIG_BLOCK, &block, NULL);  // the worker inherits it
  pthread_t th;
  if (pthread_create(&th, NULL, worker, NULL) != 0) e2e_fail("pthread_create");
  while (!worker_tid) e2e_sleep_ms(1);

  union sigval v = {.sival_int = 4711};
  if (sigqueue(getpid(), SIG_PROC, v) != 0) e2e_fail("sigqueue: %s", strerror(errno));
  union sigval tv = {.sival_int = e2e_sabotage() ? 1 : 815};
  if (pthread_sigqueue(th, SIG_THREAD, tv) != 0) e2e_fail("pthread_sigqueue failed");

  e2e_ready(argv[1]);
  e2e_sleep_ms(1500);
  e2e_hold();

  check_action(SIG_PROC, on_proc, SA_SIGINFO | SA_RESTART);
  check_action(SIG_THREAD, on_thread, SA_SIGINFO);
  check_action(SIG_ONSTACK, on_stack, SA_ONSTACK | SA_NODEFER);
  struct sigaction ign;
  sigaction(SIGPIPE, NULL, &ign);
  if (ign.sa_handler != SIG_IGN) e2e_fail("SIGPIPE no longer ignored");
  sigset_t pending;
  sigpending(&pending);
  if (!sigismember(&pending, SIG_PROC)) e2e_fail("queued process signal lost");
  if (got_proc || got_thread) e2e_fail("a blocked signal was delivered");

  worker_go = 1;
  pthread_join(th, NULL);
  if (got_thread != 1) e2e_fail("thread signal delivered %d times", got_thread);
  if (thread_value != 815) e2e_fail("thread signal value %d, expected 815", thread_value);
  if (thread_handler_tid != worker_tid) e2e_fail("thread signal handled by another thread");

  pthread_sigmask(SIG_UNBLOCK, &block, NULL);
  if (got_proc != 1) e2e_fail("process signal delivered %d times", got_proc);
  if (proc_value != 4711 || proc_code != SI_QUEUE)
    e2e_fail("process signal value %d code %d, expected 4711 SI_QUEUE", proc_value, proc_code);

  raise(SIG_ONSTACK);
  if (got_onstack != 1 || !on_altstack) e2e_fail("SA_ONSTACK handler did not run on the alt stack");
  e2e_done();
}
