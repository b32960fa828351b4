// mt_compute READY OUT: a multi-threaded compute program. WORKERS threads each
// update their own array every round, add their partial sum to a shared
// counter under a mutex, and meet at a barrier; ROUNDS rounds, a few ms
// apart, ready after READY_ROUND. At the end OUT holds the result, which the
// driver compares with an uninterrupted run's, and the program checks it
// against a single-threaded recomputation. Each thread also checks that what
// the kernel keeps for it survived: its TID, its TLS, its signal mask, its
// alternate signal stack and its robust futex list; pthread_join only
// returns if every thread's clear_child_tid was restored.
#include "e2e.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

#define WORKERS 4
#define WORDS (256 * 1024)  // 2 MiB per thread
#define ROUNDS 250
#define READY_ROUND 20

static uint64_t* arrays[WORKERS];
static uint64_t shared_sum;
static pthread_mutex_t lock;
static pthread_barrier_t barrier;
static const char* ready_path;
static __thread uint64_t tls_marker;

static uint64_t step(uint64_t v, int round, int worker, size_t i) {
  return e2e_mix(v ^ ((uint64_t)round << 40) ^ ((uint64_t)worker << 32) ^ i);
}

static void fill(uint64_t* a, int worker) {
  for (size_t i = 0; i < WORDS; i++) a[i] = e2e_mix(((uint64_t)worker << 32) | i);
}

static void* worker_main(void* arg) {
  const int w = (int)(intptr_t)arg;
  const pid_t tid = (pid_t)syscall(SYS_gettid);
  tls_marker = e2e_mix(0x7715 + w);
  // Per-thread kernel state to check after a restore.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGRTMIN + w);
  pthread_sigmask(SIG_BLOCK, &mask, NULL);
  static char altstacks[WORKERS][64 * 1024];
  stack_t ss = {.ss_sp = altstacks[w], .ss_size = sizeof altstacks[w], .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0) e2e_fail("sigaltstack: %s", strerror(errno));
  void* robust_head;
  size_t robust_len;
  if (syscall(SYS_get_robust_list, 0, &robust_head, &robust_len) != 0)
    e2e_fail("get_robust_list: %s", strerror(errno));

  uint64_t* a = arrays[w];
  for (int r = 0; r < ROUNDS; r++) {
    uint64_t partial = 0;
    for (size_t i = 0; i < WORDS; i++) {
      a[i] = step(a[i], r, w, i);
      partial += a[i];
    }
    pthread_mutex_lock(&lock);
    shared_sum += partial;
    pthread_mutex_unlock(&lock);
    if (w == 0 && r == READY_ROUND) e2e_ready(ready_path);
    if (w == 0 && r == ROUNDS - 1) e2e_hold();  // the others wait in the barrier
    pthread_barrier_wait(&barrier);
    e2e_sleep_ms(10);
  }

  if ((pid_t)syscall(SYS_gettid) != tid) e2e_fail("worker %d: TID changed from %d", w, (int)tid);
  if (tls_marker != e2e_mix(0x7715 + w)) e2e_fail("worker %d: TLS variable changed", w);
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, NULL, &now);
  for (int s = 1; s < 64; s++)
    if (sigismember(&now, s) != (s == SIGRTMIN + w))
      e2e_fail("worker %d: signal %d %s blocked", w, s, sigismember(&now, s) ? "is" : "is not");
  stack_t got;
  if (sigaltstack(NULL, &got) != 0 || got.ss_sp != altstacks[w] ||
      got.ss_size != sizeof altstacks[w])
    e2e_fail("worker %d: alternate signal stack lost", w);
  void* head_now;
  size_t len_now;
  if (syscall(SYS_get_robust_list, 0, &head_now, &len_now) != 0 || head_now != robust_head ||
      len_now != robust_len)
    e2e_fail("worker %d: robust futex list lost", w);
  return NULL;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY OUT");
  ready_path = argv[1];
  const char* out = argv[2];
  for (int w = 0; w < WORKERS; w++) {
    arrays[w] = malloc(WORDS * sizeof(uint64_t));
    if (!arrays[w]) e2e_fail("out of memory");
    fill(arrays[w], w);
  }
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&lock, &ma);
  pthread_barrier_init(&barrier, NULL, WORKERS);
  pthread_t th[WORKERS];
  for (int w = 0; w < WORKERS; w++)
    if (pthread_create(&th[w], NULL, worker_main, (void*)(intptr_t)w) != 0)
      e2e_fail("pthread_create failed");
  for (int w = 0; w < WORKERS; w++) pthread_join(th[w], NULL);

  uint64_t digest = shared_sum;
  for (int w = 0; w < WORKERS; w++)
    for (size_t i = 0; i < WORDS; i++) digest = e2e_mix(digest ^ arrays[w][i]);
  if (e2e_sabotage()) digest ^= 1;

  // The same computation again, one thread, from scratch.
  uint64_t expect_sum = 0, expect = 0;
  uint64_t* a = malloc(WORDS * sizeof(uint64_t));
  for (int w = 0; w < WORKERS; w++) {
    fill(a, w);
    for (int r = 0; r < ROUNDS; r++)
      for (size_t i = 0; i < WORDS; i++) {
        a[i] = step(a[i], r, w, i);
        expect_sum += a[i];
      }
    memcpy(arrays[w], a, WORDS * sizeof(uint64_t));  // final arrays, for the digest
  }
  expect = expect_sum;
  for (int w = 0; w < WORKERS; w++)
    for (size_t i = 0; i < WORDS; i++) expect = e2e_mix(expect ^ arrays[w][i]);
  if (digest != expect)
    e2e_fail("result %016llx differs from the recomputed %016llx", (unsigned long long)digest,
             (unsigned long long)expect);

  FILE* f = fopen(out, "w");
  if (!f) e2e_fail("create %s: %s", out, strerror(errno));
  fprintf(f, "result %016llx\n", (unsigned long long)digest);
  if (fclose(f) != 0) e2e_fail("write %s failed", out);
  e2e_done();
}
