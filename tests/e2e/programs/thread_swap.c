// thread_swap READY SWAPPED: for cr_pause's refusal. One worker thread runs;
// on SIGUSR1 the main thread ends it and starts another (a new TID), then
// creates SWAPPED. About 3 s later it ends the worker and exits 0. A
// rollback to a checkpoint taken before the swap must be refused, and the
// process must go on untouched.
#include <pthread.h>
#include <signal.h>

#include "e2e.h"

static volatile sig_atomic_t swap_requested;
static volatile int stop_worker;

static void on_usr1(int sig) {
  (void)sig;
  swap_requested = 1;
}

static void* worker(void* arg) {
  (void)arg;
  while (!stop_worker) e2e_sleep_ms(5);
  return NULL;
}

static void start(pthread_t* t) {
  stop_worker = 0;
  if (pthread_create(t, NULL, worker, NULL) != 0) e2e_fail("pthread_create failed");
}

static void finish(pthread_t t) {
  stop_worker = 1;
  if (pthread_join(t, NULL) != 0) e2e_fail("pthread_join failed");
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY SWAPPED");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  if (sigaction(SIGUSR1, &sa, NULL) != 0) e2e_fail("sigaction: %s", strerror(errno));
  pthread_t t;
  start(&t);
  e2e_ready(argv[1]);
  int swapped = 0;
  for (int step = 0; step < 300; step++) {
    if (swap_requested && !swapped) {
      finish(t);
      start(&t);
      FILE* f = fopen(argv[2], "w");
      if (!f || fclose(f) != 0) e2e_fail("create %s failed", argv[2]);
      swapped = 1;
    }
    e2e_sleep_ms(10);
  }
  if (!swapped) e2e_fail("no SIGUSR1 came");
  finish(t);
  e2e_done();
}
