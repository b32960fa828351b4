// mt_blocking READY: threads blocked in the kernel when the checkpoint is
// taken, each in a different wait: a raw futex wait, pthread_cond_wait,
// nanosleep, poll with a timeout, and pthread_barrier_wait. The main thread
// signals ready once all of them are asleep, waits a while (the checkpoint,
// kill and restore happen then), wakes the futex and condition waiters, and
// joins the barrier. Each thread checks that its wait ended the right way:
// woken by the right event, sleeps not cut short.
#include "e2e.h"

#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

#define SLEEP_MS 1500
#define BARRIER_THREADS 3  // two waiters + main

static uint32_t futex_word;
static pthread_mutex_t cond_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int cond_flag;
static pthread_barrier_t barrier;
static volatile int asleep;
static double t_start;
static int read_pipe[2], epoll_pipe[2], epfd;
static const char kMessage[] = "woken through the pipe";

static void* pipe_reader(void* arg) {
  (void)arg;
  __atomic_add_fetch(&asleep, 1, __ATOMIC_SEQ_CST);
  char buf[64] = {0};
  ssize_t n;
  while ((n = read(read_pipe[0], buf, sizeof buf - 1)) < 0 && errno == EINTR) {
  }
  if (n != (ssize_t)strlen(kMessage) || strcmp(buf, kMessage) != 0)
    e2e_fail("read from the pipe gave %zd bytes \"%s\"", n, buf);
  return NULL;
}

static void* epoll_waiter(void* arg) {
  (void)arg;
  __atomic_add_fetch(&asleep, 1, __ATOMIC_SEQ_CST);
  struct epoll_event ev;
  int n;
  while ((n = epoll_wait(epfd, &ev, 1, -1)) < 0 && errno == EINTR) {
  }
  if (n != 1 || ev.data.u64 != 0xfeedULL) e2e_fail("epoll_wait gave %d events", n);
  char c;
  if (read(epoll_pipe[0], &c, 1) != 1 || c != 'e') e2e_fail("epoll pipe byte wrong");
  return NULL;
}

static void* futex_waiter(void* arg) {
  (void)arg;
  __atomic_add_fetch(&asleep, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&futex_word, __ATOMIC_SEQ_CST) == 0) {
    long r = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    if (r != 0 && errno != EAGAIN && errno != EINTR) e2e_fail("futex wait: %s", strerror(errno));
  }
  if (futex_word != 42) e2e_fail("futex word is %u, expected 42", futex_word);
  return NULL;
}

static void* cond_waiter(void* arg) {
  (void)arg;
  pthread_mutex_lock(&cond_lock);
  __atomic_add_fetch(&asleep, 1, __ATOMIC_SEQ_CST);
  while (!cond_flag) pthread_cond_wait(&cond, &cond_lock);
  if (cond_flag != 7) e2e_fail("condition flag is %d, expected 7", cond_flag);
  pthread_mutex_unlock(&cond_lock);
  return NULL;
}

static void* sleeper(void* arg) {
  (void)arg;
  __atomic_add_fetch(&asleep, 1, __ATOMIC_SEQ_CST);
  struct timespec ts = {SLEEP_MS / 1000, (SLEEP_MS % 1000) * 1000000L};
  double t0 = e2e_now();
  while (nanosleep(&ts, &ts) != 0)
    if (errno != EINTR) e2e_fail("nanosleep: %s", strerror(errno));
  if (e2e_now() - t0 < SLEEP_MS / 1000.0 * 0.99) e2e_fail("nanosleep ended early");
  return NULL;
}

static void* poller(void* arg) {
  (void)arg;
  __atomic_add_fetch(&asleep, 1, __ATOMIC_SEQ_CST);
  double t0 = e2e_now();
  int r = poll(NULL, 0, SLEEP_MS);
  // A restarted poll starts its timeout afresh: it may last longer, never shorter.
  if (r != 0) e2e_fail("poll returned %d (%s), expected a timeout", r, strerror(errno));
  if (e2e_now() - t0 < SLEEP_MS / 1000.0 * 0.99) e2e_fail("poll timed out early");
  return NULL;
}

static void* barrier_waiter(void* arg) {
  (void)arg;
  __atomic_add_fetch(&asleep, 1, __ATOMIC_SEQ_CST);
  int r = pthread_barrier_wait(&barrier);
  if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD) e2e_fail("barrier wait: %d", r);
  return NULL;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  t_start = e2e_now();
  pthread_barrier_init(&barrier, NULL, BARRIER_THREADS);
  if (pipe(read_pipe) || pipe(epoll_pipe)) e2e_fail("pipe: %s", strerror(errno));
  epfd = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0xfeedULL};
  if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, epoll_pipe[0], &ev) != 0)
    e2e_fail("epoll: %s", strerror(errno));
  void* (*bodies[])(void*) = {futex_waiter,   cond_waiter,    sleeper,     poller,
                              barrier_waiter, barrier_waiter, pipe_reader, epoll_waiter};
  enum { N = sizeof bodies / sizeof bodies[0] };
  pthread_t th[N];
  for (int i = 0; i < N; i++)
    if (pthread_create(&th[i], NULL, bodies[i], NULL) != 0) e2e_fail("pthread_create failed");
  while (__atomic_load_n(&asleep, __ATOMIC_SEQ_CST) < N) e2e_sleep_ms(1);
  e2e_sleep_ms(50);  // let the last ones reach their wait
  e2e_ready(argv[1]);
  e2e_sleep_ms(SLEEP_MS + 500);
  e2e_hold();

  if (e2e_sabotage()) {
    __atomic_store_n(&futex_word, 41, __ATOMIC_SEQ_CST);
  } else {
    __atomic_store_n(&futex_word, 42, __ATOMIC_SEQ_CST);
  }
  syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  pthread_mutex_lock(&cond_lock);
  cond_flag = 7;
  pthread_cond_signal(&cond);
  pthread_mutex_unlock(&cond_lock);
  if (write(read_pipe[1], kMessage, strlen(kMessage)) != (ssize_t)strlen(kMessage) ||
      write(epoll_pipe[1], "e", 1) != 1)
    e2e_fail("write to a pipe: %s", strerror(errno));
  int r = pthread_barrier_wait(&barrier);
  if (r != 0 && r != PTHREAD_BARRIER_SERIAL_THREAD) e2e_fail("main barrier wait: %d", r);
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  e2e_done();
}
