// chain_phases READY [KIB]: a small process whose state moves through
// numbered phases on command, so a restore of the wrong generation is told
// apart from the right one. A region of KIB KiB (default 1024) is filled
// with a pattern; each "n" line on stdin starts the next phase P, which
// rewrites every third 16 KiB chunk (those with chunk % 3 == P % 3) with
// P's pattern and prints "phase P". A "q" line checks every byte against
// what the phases so far must have left, prints "final phase P" and ends
// (e2e_done); a mismatch exits 3. Used by corruption_campaign.sh.
#include <sys/mman.h>

#include "e2e.h"

#define CHUNK (16UL << 10)

static uint64_t word(size_t chunk, size_t i, long version) {
  return e2e_mix(((uint64_t)chunk << 40) ^ ((uint64_t)version << 20) ^ i);
}

static void fill(uint64_t* mem, size_t chunk, long version) {
  for (size_t i = 0; i < CHUNK / 8; i++) mem[chunk * (CHUNK / 8) + i] = word(chunk, i, version);
}

// The phase that last rewrote `chunk` by phase `phase` (0: the initial fill).
static long last_writer(size_t chunk, long phase) {
  for (long p = phase; p >= 1; p--)
    if ((size_t)p % 3 == chunk % 3) return p;
  return 0;
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY [KIB]");
  size_t kib = argc > 2 ? strtoul(argv[2], NULL, 10) : 1024;
  const size_t nchunks = kib * 1024 / CHUNK;
  if (nchunks < 3) e2e_fail("KIB must be at least 48");
  uint64_t* mem =
      mmap(NULL, nchunks * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
  for (size_t c = 0; c < nchunks; c++) fill(mem, c, 0);
  long phase = 0;
  if (e2e_sabotage()) mem[5] ^= 1;
  e2e_ready(argv[1]);

  char line[64];
  size_t len = 0;
  for (;;) {
    char ch;
    ssize_t n = read(0, &ch, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) e2e_fail("stdin closed in phase %ld", phase);
    if (ch != '\n') {
      if (len < sizeof line - 1) line[len++] = ch;
      continue;
    }
    line[len] = 0;
    len = 0;
    if (strcmp(line, "n") == 0) {
      phase++;
      for (size_t c = 0; c < nchunks; c++)
        if (c % 3 == (size_t)phase % 3) fill(mem, c, phase);
      printf("phase %ld\n", phase);
      fflush(stdout);
    } else if (strcmp(line, "q") == 0) {
      for (size_t c = 0; c < nchunks; c++) {
        long v = last_writer(c, phase);
        for (size_t i = 0; i < CHUNK / 8; i++)
          if (mem[c * (CHUNK / 8) + i] != word(c, i, v)) {
            fprintf(stderr, "chain_phases: phase %ld: chunk %zu word %zu is not version %ld's\n",
                    phase, c, i, v);
            exit(3);
          }
      }
      printf("final phase %ld\n", phase);
      e2e_done();
    }
  }
}
