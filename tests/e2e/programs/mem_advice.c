// mem_advice READY: mappings with madvise() state (docs/format.md, Vma
// advice) must come back with it. Five 4 MiB regions, 2 MiB aligned, advised
// MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_DONTFORK, MADV_WIPEONFORK and
// MADV_DONTDUMP, and one whose first half only is MADV_HUGEPAGE (a split
// mapping). After the checkpoint the program checks its own smaps (each
// region's VmFlags), its contents, and what a fork sees: no DONTFORK region,
// a zeroed WIPEONFORK region. (Whether huge pages back the restored memory is
// bench/restored_speed.sh's question: tracking armed on a running process
// changes it, docs/performance.md.) Sabotage: the huge region loses its advice before
// READY, so the check must fail.
#include <sys/mman.h>
#include <sys/wait.h>

#include "e2e.h"

#define REGION (4ul << 20)
#define NREGIONS 6

static const struct {
  int advice;
  const char* flag;  // smaps VmFlags name
} kRegions[NREGIONS] = {{MADV_HUGEPAGE, "hg"},   {MADV_NOHUGEPAGE, "nh"}, {MADV_DONTFORK, "dc"},
                        {MADV_WIPEONFORK, "wf"}, {MADV_DONTDUMP, "dd"},   {-1, "hg"}};

static uint8_t* region[NREGIONS];

static uint8_t* map_aligned(void) {
  size_t huge = 2ul << 20;
  uint8_t* raw =
      mmap(NULL, REGION + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
  return (uint8_t*)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
}

static void fill(int r, uint64_t round) {
  uint64_t* w = (uint64_t*)region[r];
  for (size_t i = 0; i < REGION / 8; i += 512)
    w[i] = e2e_mix(((uint64_t)r << 40) ^ (i << 8) ^ round);
}

static void check_content(int r, uint64_t round) {
  const uint64_t* w = (const uint64_t*)region[r];
  for (size_t i = 0; i < REGION / 8; i += 512)
    if (w[i] != e2e_mix(((uint64_t)r << 40) ^ (i << 8) ^ round))
      e2e_fail("region %d (%s): word %zu changed", r, kRegions[r].flag, i);
}

// The VmFlags line and AnonHugePages (kB) of the smaps entry starting at `at`.
static int smaps_entry(const void* at, char* flags, size_t flags_size, long* huge_kb) {
  FILE* f = fopen("/proc/self/smaps", "re");
  if (!f) e2e_fail("open smaps: %s", strerror(errno));
  char line[512];
  int in = 0, found = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long start, end;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3) {  // an entry's first line
      in = start == (unsigned long)at;
      continue;
    }
    if (!in) continue;
    if (sscanf(line, "AnonHugePages: %ld kB", huge_kb) == 1) continue;
    if (strncmp(line, "VmFlags:", 8) == 0) {
      snprintf(flags, flags_size, "%s", line + 8);
      flags[strcspn(flags, "\n")] = 0;
      found = 1;
      break;
    }
  }
  fclose(f);
  return found;
}

static int has_flag(const char* flags, const char* name) {
  char word[8];
  for (const char* p = flags; sscanf(p, "%7s", word) == 1; p = strstr(p, word) + strlen(word))
    if (strcmp(word, name) == 0) return 1;
  return 0;
}

static void check_advice(void) {
  char flags[512];
  long huge_kb = 0;
  for (int r = 0; r < NREGIONS; r++) {
    if (!smaps_entry(region[r], flags, sizeof flags, &huge_kb))
      e2e_fail("region %d: no smaps entry starts at %p", r, (void*)region[r]);
    if (!has_flag(flags, kRegions[r].flag))
      e2e_fail("region %d: VmFlags lack %s:%s", r, kRegions[r].flag, flags);
  }
  // The split region's second half has no huge-page advice.
  if (!smaps_entry(region[5] + REGION / 2, flags, sizeof flags, &huge_kb))
    e2e_fail("the split region's second half is not a mapping of its own");
  if (has_flag(flags, "hg")) e2e_fail("the split region's second half gained MADV_HUGEPAGE");
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY");
  for (int r = 0; r < NREGIONS; r++) {
    region[r] = map_aligned();
    if (kRegions[r].advice >= 0 && madvise(region[r], REGION, kRegions[r].advice) != 0)
      e2e_fail("madvise %s: %s", kRegions[r].flag, strerror(errno));
  }
  if (madvise(region[5], REGION / 2, MADV_HUGEPAGE) != 0) e2e_fail("madvise: %s", strerror(errno));
  for (int r = 0; r < NREGIONS; r++) fill(r, 0);
  if (e2e_sabotage()) madvise(region[0], REGION, MADV_NOHUGEPAGE);
  e2e_ready(argv[1]);

  uint64_t round = 0;
  for (int step = 0; step < 300; step++) {
    ++round;
    for (int r = 0; r < NREGIONS; r++) fill(r, round);
    e2e_sleep_ms(10);
  }
  e2e_hold();
  for (int r = 0; r < NREGIONS; r++) check_content(r, round);
  check_advice();
  char flags[512];
  long huge_kb = 0;
  pid_t child = fork();
  if (child < 0) e2e_fail("fork: %s", strerror(errno));
  if (child == 0) {
    // DONTFORK: not mapped in the child; WIPEONFORK: mapped, zero.
    if (smaps_entry(region[2], flags, sizeof flags, &huge_kb)) _exit(3);
    for (size_t i = 0; i < REGION; i += 4096)
      if (region[3][i] != 0) _exit(4);
    _exit(0);
  }
  int st = 0;
  if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    e2e_fail("the forked child saw DONTFORK/WIPEONFORK wrong (status %#x)", st);
  e2e_done();
}
