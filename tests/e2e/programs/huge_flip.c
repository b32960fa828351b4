// huge_flip READY_DIR: four 2 MiB blocks in transparent huge pages
// (MADV_HUGEPAGE) that flip between huge and small from one round to the next
// while they are written, on a schedule that walks the pagemap-scan tracker's
// huge-page handling (dirty/huge_blocks) through its states: a huge block
// written every round (left unprotected, saved whole: it must stay huge), one
// that goes quiet (protected whole) and is written again (split), one split
// by MADV_NOHUGEPAGE + mprotect of a page, collapsed back (MADV_COLLAPSE),
// half of one unmapped and mapped again, pages dropped.
//
// Rounds 0..13; after round k's writes the program saves READY_DIR/round-k.copy
// and READY_DIR/round-k.thp (KiB of its blocks in huge pages, from
// /proc/self/smaps), creates READY_DIR/round-k.ready ("<pid> <nonce>") and
// waits (at most 60 s) for READY_DIR/go-k. If READY_DIR/verify-k exists then
// (the driver restored this round's generation), it compares the blocks byte
// for byte with round-k.copy, prints "verified round k" and ends ("done <pid>
// <nonce>"); a difference exits 1 naming the block, the page and the round
// whose content was found. Otherwise it goes on; after the last round it
// ends the same way.
#include "e2e.h"  // first: it defines _GNU_SOURCE
#include "round_copy.h"

#include <sys/mman.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define BLOCKS 4
#define BLOCK (2u << 20)
#define PAGE 4096u
#define PAGES_PER_BLOCK (BLOCK / PAGE)
#define ROUNDS 14

// Per block, round 1..13 (round 0 fills and collapses all): H rewrite every
// page; c write three pages; h MADV_HUGEPAGE + MADV_COLLAPSE, write one page
// (refused while the tracker protects some of its pages: fine); s
// MADV_NOHUGEPAGE and split (mprotect one page read-only and back), write
// two; u unmap the second half, map it again (MADV_HUGEPAGE) and fill it; z
// drop two pages, write one; . nothing.
static const char* kSchedule[BLOCKS] = {
    "HHHHHHHHHHHHH",
    "c...c..H.h.Hc",
    "s.hHHhc.z.hHH",
    ".u.hHHHs.hHz.",
};

static unsigned char* mem;

// Page p's content in round r: recognisable words (round, page) everywhere.
static void fill_page(uint64_t p, int r) {
  uint64_t* w = (uint64_t*)(mem + p * PAGE);
  for (unsigned i = 0; i < PAGE / 8; i += 64) w[i] = ((uint64_t)r << 32) | p;
  w[PAGE / 8 - 1] = e2e_mix(((uint64_t)r << 32) ^ p);
}

// KiB of [mem, mem + BLOCKS * BLOCK) mapped by huge pages (AnonHugePages of
// the mappings inside it).
static long thp_kb(void) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (!f) e2e_fail("open /proc/self/smaps: %s", strerror(errno));
  char line[512];
  long total = 0;
  int inside = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = a >= (uintptr_t)mem && b <= (uintptr_t)mem + (size_t)BLOCKS * BLOCK;
      continue;
    }
    long kb;
    if (inside && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) total += kb;
  }
  fclose(f);
  return total;
}

static void save_thp(const char* dir, int k) {
  char path[4096];
  snprintf(path, sizeof path, "%s/round-%d.thp", dir, k);
  FILE* f = fopen(path, "w");
  if (!f) e2e_fail("create %s: %s", path, strerror(errno));
  fprintf(f, "%ld\n", thp_kb());
  fclose(f);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY_DIR");
  const char* dir = argv[1];
  unsigned char* raw = mmap(NULL, (size_t)(BLOCKS + 1) * BLOCK, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
  mem = (unsigned char*)(((uintptr_t)raw + BLOCK - 1) & ~(uintptr_t)(BLOCK - 1));
  madvise(mem, (size_t)BLOCKS * BLOCK, MADV_HUGEPAGE);
  for (uint64_t p = 0; p < (uint64_t)BLOCKS * PAGES_PER_BLOCK; p++) fill_page(p, 0);
  (void)madvise(mem, (size_t)BLOCKS * BLOCK, MADV_COLLAPSE);  // best effort
  uint64_t rng = 54321;
  for (int k = 0; k < ROUNDS; k++) {
    for (int b = 0; b < BLOCKS && k > 0; b++) {
      const uint64_t first = (uint64_t)b * PAGES_PER_BLOCK;
      unsigned char* at = mem + first * PAGE;
      int writes = 0;
      switch (kSchedule[b][k - 1]) {
        case 'H':
          for (uint64_t p = 0; p < PAGES_PER_BLOCK; p++) fill_page(first + p, k);
          break;
        case 'h':
          madvise(at, BLOCK, MADV_HUGEPAGE);
          (void)madvise(at, BLOCK, MADV_COLLAPSE);
          writes = 1;
          break;
        case 's':
          madvise(at, BLOCK, MADV_NOHUGEPAGE);
          if (mprotect(at, PAGE, PROT_READ) != 0 || mprotect(at, PAGE, PROT_READ | PROT_WRITE) != 0)
            e2e_fail("mprotect: %s", strerror(errno));
          writes = 2;
          break;
        case 'u':
          if (munmap(at + BLOCK / 2, BLOCK / 2) != 0 ||
              mmap(at + BLOCK / 2, BLOCK / 2, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != at + BLOCK / 2)
            e2e_fail("unmap and map again: %s", strerror(errno));
          madvise(at + BLOCK / 2, BLOCK / 2, MADV_HUGEPAGE);
          for (uint64_t p = PAGES_PER_BLOCK / 2; p < PAGES_PER_BLOCK; p++) fill_page(first + p, k);
          break;
        case 'z':
          for (int i = 0; i < 2; i++) {
            rng = e2e_mix(rng);
            madvise(mem + (first + rng % PAGES_PER_BLOCK) * PAGE, PAGE, MADV_DONTNEED);
          }
          writes = 1;
          break;
        case 'c':
          writes = 3;
          break;
        default:
          break;
      }
      for (int i = 0; i < writes; i++) {
        rng = e2e_mix(rng);
        fill_page(first + rng % PAGES_PER_BLOCK, k);
      }
    }
    round_copy_save(dir, k, mem, (size_t)BLOCKS * BLOCK);
    save_thp(dir, k);
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
