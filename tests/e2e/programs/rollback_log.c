// rollback_log READY LOG [STEPS]: for cr_pause. Each 10 ms step rewrites one
// 1 MiB chunk of a 32 MiB block (bumping its version), grows a linked list
// of small malloc'd nodes (the brk heap grows), every 25 steps replaces a
// 4 MiB mmap'd scratch block by a new one at another address (the layout
// changes), and appends its step number to LOG, opened O_APPEND: the log is
// outside the process, so a rollback shows in it as a step number that goes
// back. At the end it checks every byte of its state and exits 0.
#include <sys/mman.h>

#include "e2e.h"

#define CHUNK (1UL << 20)
#define NCHUNKS 32
#define SCRATCH (4UL << 20)

struct node {
  struct node* next;
  long step;
  unsigned char fill[1000];
};

static uint64_t word(uint64_t i, uint32_t v) {
  return e2e_mix(i ^ ((uint64_t)v << 40));
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY LOG [STEPS]");
  long steps = argc > 3 ? strtol(argv[3], NULL, 10) : 300;
  int log = open(argv[2], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) e2e_fail("open %s: %s", argv[2], strerror(errno));
  uint64_t* big = malloc(NCHUNKS * CHUNK);
  uint32_t version[NCHUNKS] = {0};
  if (!big) e2e_fail("malloc failed");
  for (size_t i = 0; i < NCHUNKS * CHUNK / 8; i++) big[i] = word(i, 0);
  struct node* list = NULL;
  uint64_t* scratch = NULL;
  long scratch_step = -1;
  if (e2e_sabotage()) big[12345] ^= 1;
  e2e_ready(argv[1]);

  for (long s = 0; s < steps; s++) {
    size_t c = (size_t)(s * 7) % NCHUNKS;
    version[c]++;
    for (size_t i = c * CHUNK / 8; i < (c + 1) * CHUNK / 8; i++) big[i] = word(i, version[c]);
    struct node* n = malloc(sizeof *n);
    if (!n) e2e_fail("malloc failed");
    n->next = list;
    n->step = s;
    memset(n->fill, (int)(s & 0xff), sizeof n->fill);
    list = n;
    if (s % 25 == 0) {
      void* p = mmap(NULL, SCRATCH, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
      if (scratch) munmap(scratch, SCRATCH);
      scratch = p;
      scratch_step = s;
      for (size_t i = 0; i < SCRATCH / 8; i++) scratch[i] = e2e_mix(i + (uint64_t)s * 1000003);
    }
    char line[32];
    int len = snprintf(line, sizeof line, "%ld\n", s);
    if (write(log, line, (size_t)len) != len) e2e_fail("write log: %s", strerror(errno));
    e2e_sleep_ms(10);
  }

  uint32_t expect[NCHUNKS] = {0};
  for (long s = 0; s < steps; s++) expect[(size_t)(s * 7) % NCHUNKS]++;
  for (size_t c = 0; c < NCHUNKS; c++)
    if (version[c] != expect[c])
      e2e_fail("chunk %zu: version %u, expected %u", c, version[c], expect[c]);
  for (size_t i = 0; i < NCHUNKS * CHUNK / 8; i++)
    if (big[i] != word(i, version[i / (CHUNK / 8)])) e2e_fail("big block word %zu is wrong", i);
  long want = steps - 1;
  for (struct node* n = list; n; n = n->next, want--) {
    if (n->step != want) e2e_fail("list node for step %ld says %ld", want, n->step);
    for (size_t i = 0; i < sizeof n->fill; i++)
      if (n->fill[i] != (unsigned char)(want & 0xff))
        e2e_fail("list node %ld byte %zu is wrong", want, i);
  }
  if (want != -1) e2e_fail("list ends at step %ld", want);
  if (steps > 0) {
    if (scratch_step != ((steps - 1) / 25) * 25)
      e2e_fail("scratch block of step %ld", scratch_step);
    for (size_t i = 0; i < SCRATCH / 8; i++)
      if (scratch[i] != e2e_mix(i + (uint64_t)scratch_step * 1000003))
        e2e_fail("scratch word %zu is wrong", i);
  }
  e2e_done();
}
