// write_patterns PATTERN READY_DIR: a 32 MiB region (16 blocks of 2 MiB)
// written in rounds by one of the write patterns that an adaptive dirty-page
// tracker must follow without saving much more than what was written:
//
//   band    a rotating band: 2 blocks (one eighth) rewritten for 3 rounds,
//           then the next 2 blocks
//   sparse  random pages, 2 % of the region per round
//   stream  a writer advancing 1 MiB per round (each block over 2 rounds)
//   sweep   every page, every round (a multigrid solver)
//   phase   every page for rounds 1-4, then 1 % random pages
//   quiet   every page for rounds 1-4, then nothing
//
// Round 0 only fills the region. After round k's writes the program counts
// the pages of the region whose content differs from round k-1 (ground
// truth by content: a hash of every page, kept per round), writes the count
// to READY_DIR/round-k.changed, creates READY_DIR/round-k.ready ("<pid>
// <nonce>") and waits (at most 60 s) for READY_DIR/go-k. After the last
// round it ends ("done <pid> <nonce>").
//
//   write_patterns timed MIB PERIOD_MS SECONDS READY_FILE
// is the same band pattern by the clock, for measurements: MIB of memory,
// one eighth of it rewritten over and over for PERIOD_MS, then the next
// eighth, for SECONDS.
#include "e2e.h"  // first: it defines _GNU_SOURCE

#include <sys/mman.h>

#define BLOCK (2u << 20)
#define PAGE 4096u
#define PAGES_PER_BLOCK (BLOCK / PAGE)
#define BLOCKS 16
#define PAGES (BLOCKS * PAGES_PER_BLOCK)
#define ROUNDS 10

static unsigned char* mem;
static uint64_t hashes[PAGES];

// Page p's content in round r (every round's differs from the last one's).
static void fill_page(unsigned char* base, uint64_t p, uint64_t r) {
  uint64_t* w = (uint64_t*)(base + p * PAGE);
  const uint64_t seed = e2e_mix((r << 32) ^ p);
  for (unsigned i = 0; i < PAGE / 8; i += 8) w[i] = seed + i;
}

static uint64_t page_hash(uint64_t p) {
  const uint64_t* w = (const uint64_t*)(mem + p * PAGE);
  uint64_t h = 0x243f6a8885a308d3ULL;
  for (unsigned i = 0; i < PAGE / 8; i++) h = (h ^ w[i]) * 0x100000001b3ULL;
  return h;
}

static unsigned char* map_aligned(size_t len) {
  unsigned char* raw =
      mmap(NULL, len + BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
  unsigned char* m = (unsigned char*)(((uintptr_t)raw + BLOCK - 1) & ~(uintptr_t)(BLOCK - 1));
  madvise(m, len, MADV_NOHUGEPAGE);
  return m;
}

static uint64_t rng = 12345;

static void random_pages(unsigned n, int k) {
  for (unsigned i = 0; i < n; i++) {
    rng = e2e_mix(rng);
    fill_page(mem, rng % PAGES, (uint64_t)k);
  }
}

static void write_round(const char* pattern, int k) {
  if (strcmp(pattern, "band") == 0) {
    const uint64_t first = (uint64_t)(((k - 1) / 3) % 8) * 2 * PAGES_PER_BLOCK;
    for (uint64_t p = first; p < first + 2 * PAGES_PER_BLOCK; p++) fill_page(mem, p, (uint64_t)k);
  } else if (strcmp(pattern, "sparse") == 0) {
    random_pages(PAGES / 50, k);
  } else if (strcmp(pattern, "stream") == 0) {
    const uint64_t first = (uint64_t)(k - 1) * (PAGES_PER_BLOCK / 2) % PAGES;
    for (uint64_t p = first; p < first + PAGES_PER_BLOCK / 2; p++) fill_page(mem, p, (uint64_t)k);
  } else if (strcmp(pattern, "sweep") == 0 || k <= 4) {
    if (strcmp(pattern, "sweep") != 0 && strcmp(pattern, "phase") != 0 &&
        strcmp(pattern, "quiet") != 0)
      e2e_fail("unknown pattern %s", pattern);
    for (uint64_t p = 0; p < PAGES; p++) fill_page(mem, p, (uint64_t)k);
  } else if (strcmp(pattern, "phase") == 0) {
    random_pages(PAGES / 100, k);
  }  // quiet: nothing
}

// The clock-driven band (see the top): never returns.
__attribute__((noreturn)) static void timed(int argc, char** argv) {
  if (argc != 6) e2e_fail("usage: write_patterns timed MIB PERIOD_MS SECONDS READY_FILE");
  const uint64_t pages = (uint64_t)atoi(argv[2]) << 8, band = pages / 8;
  const double period = atoi(argv[3]) / 1000.0, seconds = atof(argv[4]);
  if (band == 0 || period <= 0) e2e_fail("bad size or period");
  mem = map_aligned(pages * PAGE);
  for (uint64_t p = 0; p < pages; p++) fill_page(mem, p, 0);
  e2e_ready(argv[5]);
  const double t0 = e2e_now();
  uint64_t pass = 1;
  for (double t = 0; t < seconds; t = e2e_now() - t0, pass++) {
    const uint64_t first = ((uint64_t)(t / period) % 8) * band;
    for (uint64_t p = first; p < first + band; p++) fill_page(mem, p, pass);
  }
  e2e_done();
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "PATTERN READY_DIR | timed MIB PERIOD_MS SECONDS READY_FILE");
  if (strcmp(argv[1], "timed") == 0) timed(argc, argv);
  const char* pattern = argv[1];
  const char* dir = argv[2];
  mem = map_aligned((size_t)PAGES * PAGE);
  for (int k = 0; k < ROUNDS; k++) {
    if (k == 0)
      for (uint64_t p = 0; p < PAGES; p++) fill_page(mem, p, 0);
    else
      write_round(pattern, k);
    uint64_t changed = 0;
    for (uint64_t p = 0; p < PAGES; p++) {
      const uint64_t h = page_hash(p);
      changed += k > 0 && h != hashes[p];
      hashes[p] = h;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/round-%d.changed", dir, k);
    FILE* f = fopen(path, "w");
    if (!f || fprintf(f, "%llu\n", (unsigned long long)changed) < 0 || fclose(f) != 0)
      e2e_fail("write %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/round-%d.ready", dir, k);
    e2e_ready(path);
    snprintf(path, sizeof path, "%s/go-%d", dir, k);
    for (int waited = 0; access(path, F_OK) != 0; waited += 5) {
      if (waited > 60000) e2e_fail("no %s after 60 s", path);
      e2e_sleep_ms(5);
    }
  }
  e2e_done();
}
