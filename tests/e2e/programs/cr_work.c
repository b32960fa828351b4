// cr_work ROUNDS CHILDREN MIB [GATE]: a small job for cr_run and the installed
// C launcher. The root forks CHILDREN workers; each process (root included)
// fills MIB MiB with a pattern and rewrites one 1 MiB chunk per round
// (ROUNDS rounds of 10 ms). With GATE, each then waits (polling every 10 ms)
// until the file GATE exists, so a test decides when the job may end instead
// of racing it. At the end every worker sends a digest of its
// whole buffer to the root through a pipe and exits 0; the root checks each
// worker's exit status and prints "result <hex>" (the digests combined):
// the same for every run that was never corrupted, whatever checkpoints,
// kills and restores happened in between.
#include "e2e.h"

#include <sys/wait.h>

#define CHUNK (1UL << 20)

static const char* gate;

static uint64_t digest_work(int slot, long rounds, size_t mib) {
  const size_t words = mib * CHUNK / 8, chunk_words = CHUNK / 8;
  uint64_t* buf = malloc(mib * CHUNK);
  if (!buf) e2e_fail("malloc of %zu MiB failed", mib);
  for (size_t i = 0; i < words; i++) buf[i] = e2e_mix(i ^ ((uint64_t)slot << 56));
  for (long r = 1; r <= rounds; r++) {
    size_t c = (size_t)(r * 7919 + slot) % mib;
    for (size_t i = c * chunk_words; i < (c + 1) * chunk_words; i++)
      buf[i] = e2e_mix(buf[i] ^ (uint64_t)r);
    e2e_sleep_ms(10);
  }
  while (gate && access(gate, F_OK) != 0) e2e_sleep_ms(10);
  uint64_t d = 0;
  for (size_t i = 0; i < words; i++) d = e2e_mix(d ^ buf[i]);
  free(buf);
  return d;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 3, "ROUNDS CHILDREN MIB [GATE]");
  long rounds = atol(argv[1]);
  int children = atoi(argv[2]);
  size_t mib = strtoul(argv[3], NULL, 10);
  gate = argc > 4 ? argv[4] : NULL;
  if (rounds < 1 || children < 0 || children > 16 || mib < 1) e2e_fail("bad arguments");
  int p[2];
  if (pipe(p) != 0) e2e_fail("pipe: %s", strerror(errno));
  pid_t kids[16];
  for (int k = 0; k < children; k++) {
    kids[k] = fork();
    if (kids[k] < 0) e2e_fail("fork: %s", strerror(errno));
    if (kids[k] == 0) {
      close(p[0]);
      uint64_t msg[2] = {(uint64_t)k + 1, digest_work(k + 1, rounds, mib)};
      if (write(p[1], msg, sizeof msg) != sizeof msg) e2e_fail("write: %s", strerror(errno));
      _exit(0);
    }
  }
  close(p[1]);
  uint64_t total = digest_work(0, rounds, mib);
  uint64_t got[17] = {0};
  for (int k = 0; k < children; k++) {
    uint64_t msg[2];
    ssize_t n;
    while ((n = read(p[0], msg, sizeof msg)) < 0 && errno == EINTR) {
    }
    if (n != sizeof msg || msg[0] < 1 || msg[0] > (uint64_t)children)
      e2e_fail("worker result %d: short read or bad slot", k);
    got[msg[0]] = msg[1];
  }
  for (int k = 0; k < children; k++) {
    int st = 0;
    if (waitpid(kids[k], &st, 0) != kids[k]) e2e_fail("waitpid: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) e2e_fail("worker %d ended with status %d", k, st);
  }
  for (int k = 1; k <= children; k++) total = e2e_mix(total ^ got[k] ^ (uint64_t)k);
  printf("result %016llx\n", (unsigned long long)total);
  return 0;
}
