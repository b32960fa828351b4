// hot_cold READY_DIR: four 2 MiB blocks that flip between hot (every page
// rewritten) and cold (a few pages written, some dropped with MADV_DONTNEED,
// or nothing) from one round to the next, on a schedule that walks the
// pagemap-scan tracker's adaptive write-protection (dirty/adaptive) through
// all its states: a block becoming hot, staying unprotected, being sampled,
// found hot again, calming down while unprotected, going back to tracking.
//
// Rounds 0..13; after round k's writes the program saves READY_DIR/round-k.copy
// (write(2) straight from the blocks: nothing else is dirtied), creates
// READY_DIR/round-k.ready ("<pid> <nonce>") and waits (at most 60 s) for
// READY_DIR/go-k. If READY_DIR/verify-k exists then (the driver restored this
// round's generation), it compares the blocks byte for byte with round-k.copy,
// prints "verified round k" and ends ("done <pid> <nonce>"); a difference
// exits 1 naming the block, the page and the round whose content was found.
// Otherwise it goes on; after the last round it ends the same way.
#include "e2e.h"  // first: it defines _GNU_SOURCE
#include "round_copy.h"

#include <sys/mman.h>

#define BLOCKS 4
#define BLOCK (2u << 20)
#define PAGE 4096u
#define PAGES_PER_BLOCK (BLOCK / PAGE)
#define ROUNDS 14

// Per block, round 1..13 (round 0 only fills): H rewrite every page, c write
// three pages, z drop two pages and write one, . nothing.
static const char* kSchedule[BLOCKS] = {
    "HHHHHHccccHcc",
    "HcHcHcHcHcHcH",
    "HHHz..cHHHH.c",
    "cccHccHHHzccc",
};

static unsigned char* mem;

// Page p's content in round r: recognisable words (round, page) everywhere.
static void fill_page(uint64_t p, int r) {
  uint64_t* w = (uint64_t*)(mem + p * PAGE);
  for (unsigned i = 0; i < PAGE / 8; i += 64) w[i] = ((uint64_t)r << 32) | p;
  w[PAGE / 8 - 1] = e2e_mix(((uint64_t)r << 32) ^ p);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY_DIR");
  const char* dir = argv[1];
  unsigned char* raw = mmap(NULL, (size_t)(BLOCKS + 1) * BLOCK, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
  mem = (unsigned char*)(((uintptr_t)raw + BLOCK - 1) & ~(uintptr_t)(BLOCK - 1));
  madvise(mem, (size_t)BLOCKS * BLOCK, MADV_NOHUGEPAGE);
  for (uint64_t p = 0; p < (uint64_t)BLOCKS * PAGES_PER_BLOCK; p++) fill_page(p, 0);
  uint64_t rng = 12345;
  for (int k = 0; k < ROUNDS; k++) {
    for (int b = 0; b < BLOCKS && k > 0; b++) {
      const uint64_t first = (uint64_t)b * PAGES_PER_BLOCK;
      switch (kSchedule[b][k - 1]) {
        case 'H':
          for (uint64_t p = 0; p < PAGES_PER_BLOCK; p++) fill_page(first + p, k);
          break;
        case 'z':
          for (int i = 0; i < 2; i++) {
            rng = e2e_mix(rng);
            madvise(mem + (first + rng % PAGES_PER_BLOCK) * PAGE, PAGE, MADV_DONTNEED);
          }
          // and one page written
          __attribute__((fallthrough));
        case 'c':
          for (int i = 0; i < (kSchedule[b][k - 1] == 'c' ? 3 : 1); i++) {
            rng = e2e_mix(rng);
            fill_page(first + rng % PAGES_PER_BLOCK, k);
          }
          break;
        default:
          break;
      }
    }
    round_copy_save(dir, k, mem, (size_t)BLOCKS * BLOCK);
    char path[4096];
    snprintf(path, sizeof path, "%s/round-%d.ready", dir, k);
    e2e_ready(path);
    snprintf(path, sizeof path, "%s/go-%d", dir, k);
    for (int waited = 0; access(path, F_OK) != 0; waited += 5) {
      if (waited > 60000) e2e_fail("no %s after 60 s", path);
      e2e_sleep_ms(5);
    }
    snprintf(path, sizeof path, "%s/verify-%d", dir, k);
    if (access(path, F_OK) == 0) {
      round_copy_verify(dir, k, mem, (size_t)BLOCKS * BLOCK, PAGES_PER_BLOCK);
      printf("verified round %d\n", k);
      e2e_done();
    }
  }
  e2e_done();
}
