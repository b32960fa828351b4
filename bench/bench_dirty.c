// bench_dirty [PAGES]: what dirty tracking costs, per tracker, in one run.
//
// A child process (the "application") owns PAGES pages (default 8192, 32 MiB)
// of private anonymous memory, all populated. For each tracker:
//   none        no tracking (the hash tracker's case: it costs the
//               application nothing and pays at collect time);
//   kmod        the ckpt_dirty module: START, then COLLECT (PTE dirty bits);
//   soft-dirty  clear_refs 4, then pagemap bit 55 (write-protect faults).
// it measures
//   first write  ns per page for the application's first write to each page
//                after tracking was reset (timed inside the child; min of 3);
//   collect      ms for the tracker (this process) to learn which of the
//                pages were written, with 10 % of them written at random, and
//                to reset tracking; for none, the hash way: read every page
//                (process_vm_readv) and compare its xxh3 with a table.
// Every collect is also checked: exactly the written pages must be reported,
// else the benchmark fails (no numbers from a broken tracker).
//
// Output: "KTEST INFO bench ..." lines, one JSON line ("KTEST INFO bench json
// {...}"), and "KTEST PASS bench.dirty (...)" or "KTEST FAIL bench.dirty: ...".
// Runs as root in the test guest (tests/kernel), where the module is loaded
// and soft-dirty works; elsewhere the unavailable trackers fail.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "ckpt_dirty.h"

#define P 4096UL

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t npages = 8192;
static int cmd_fd, ack_fd;
static pid_t child;
static uint64_t base;

// The application: 'a' = write every page and answer the ns per page;
// 'r' + list = write the listed pages.
static void app(int cmd, int ack, int info) {
  char* mem = mmap(NULL, npages * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(mem, npages * P, MADV_NOHUGEPAGE);  // 4 KiB pages: the tracked unit
  for (size_t i = 0; i < npages; i++) mem[i * P] = 1;
  char* filler = mmap(NULL, 64 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (size_t i = 0; i < 64; i++) filler[i * P] = 1;  // pushes mem out of the LRU batch
  uint64_t a = (uintptr_t)mem;
  (void)!write(info, &a, sizeof a);
  char op;
  while (read(cmd, &op, 1) == 1) {
    if (op == 'a') {
      double t0 = now();
      for (size_t i = 0; i < npages; i++) mem[i * P + 64]++;
      double ns = (now() - t0) * 1e9 / npages;
      (void)!write(ack, &ns, sizeof ns);
    } else if (op == 'r') {
      uint32_t n, page;
      (void)!read(cmd, &n, sizeof n);
      for (uint32_t i = 0; i < n; i++) {
        (void)!read(cmd, &page, sizeof page);
        mem[page * P + 65]++;
      }
      (void)!write(ack, "k", 1);
    }
  }
  _exit(0);
}

static double app_write_all(void) {
  double ns;
  if (write(cmd_fd, "a", 1) != 1 || read(ack_fd, &ns, sizeof ns) != sizeof ns) exit(2);
  return ns;
}

static uint32_t* chosen;
static uint8_t* want;
static uint32_t nchosen;
static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static void app_write_random(void) {
  memset(want, 0, npages);
  nchosen = 0;
  for (size_t i = 0; i < npages; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    if (rng % 10 == 0) chosen[nchosen++] = i, want[i] = 1;
  }
  char k;
  if (write(cmd_fd, "r", 1) != 1 || write(cmd_fd, &nchosen, 4) != 4 ||
      write(cmd_fd, chosen, nchosen * 4) != (ssize_t)(nchosen * 4) || read(ack_fd, &k, 1) != 1)
    exit(2);
}

// ---- trackers: reset and collect (sets got[]) ----

static int dev = -1;
static uint64_t token;
static uint64_t* bits;
static uint8_t* got;
static uint64_t* hashes;
static char* readbuf;

static int freeze(void) {
  int st;
  if (ptrace(PTRACE_SEIZE, child, 0, 0) || ptrace(PTRACE_INTERRUPT, child, 0, 0) ||
      waitpid(child, &st, __WALL) != child)
    return -1;
  return 0;
}
static void thaw(void) {
  ptrace(PTRACE_DETACH, child, 0, 0);
}

static int kmod_reset(void) {
  struct ckpt_dirty_start a = {.pid = child};
  freeze();
  int r = ioctl(dev, CKPT_DIRTY_IOC_START, &a);
  thaw();
  token = a.token;
  return r;
}
static int kmod_collect(void) {
  struct ckpt_dirty_collect a = {.pid = child,
                                 .token = token,
                                 .start = base,
                                 .end = base + npages * P,
                                 .bitmap = (uintptr_t)bits,
                                 .bitmap_bits = (npages + 63) / 64 * 64};
  int r = ioctl(dev, CKPT_DIRTY_IOC_COLLECT, &a);
  token = a.token;
  for (size_t i = 0; i < npages; i++) got[i] = (bits[i / 64] >> (i % 64)) & 1;
  return r;
}

static int clear_refs(void) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/clear_refs", child);
  int fd = open(path, O_WRONLY);
  int r = fd >= 0 && write(fd, "4", 1) == 1 ? 0 : -1;
  if (fd >= 0) close(fd);
  return r;
}
static int sd_collect(void) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/pagemap", child);
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = pread(fd, bits, npages * 8, (off_t)(base / P * 8));
  close(fd);
  if (n != (ssize_t)(npages * 8)) return -1;
  for (size_t i = 0; i < npages; i++) got[i] = (bits[i] >> 55) & 1;
  return clear_refs();
}

// The hash way: read everything, hash each page, compare with the table.
static int hash_pass(int compare) {
  const size_t chunk = 256;  // pages per process_vm_readv
  for (size_t p = 0; p < npages; p += chunk) {
    size_t n = npages - p < chunk ? npages - p : chunk;
    struct iovec l = {readbuf, n * P}, r = {(void*)(uintptr_t)(base + p * P), n * P};
    if (process_vm_readv(child, &l, 1, &r, 1, 0) != (ssize_t)(n * P)) return -1;
    for (size_t i = 0; i < n; i++) {
      uint64_t h = XXH3_64bits(readbuf + i * P, P);
      if (compare) got[p + i] = h != hashes[p + i];
      hashes[p + i] = h;
    }
  }
  return 0;
}
static int hash_reset(void) {
  return hash_pass(0);
}

// No tracking, but every CPU's TLB flushed as a kmod reset does (the module
// does it for START on any process: here this one): the baseline for kmod's
// first write, which pays a TLB refill plus the CPU setting the dirty bit.
static int flush_reset(void) {
  struct ckpt_dirty_start a = {.pid = getpid()};
  struct ckpt_dirty_stop s = {.pid = getpid()};
  if (ioctl(dev, CKPT_DIRTY_IOC_START, &a)) return -1;
  return ioctl(dev, CKPT_DIRTY_IOC_STOP, &s);
}
static int hash_collect(void) {
  return hash_pass(1);
}

struct tracker {
  const char* name;
  int (*reset)(void);
  int (*collect)(void);
  double first_write_ns, rewrite_ns, collect_ms, reset_ms;
};

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc > 1) npages = strtoul(argv[1], NULL, 10);
  setvbuf(stdout, NULL, _IOLBF, 0);
  chosen = calloc(npages, 4);
  want = calloc(npages, 1);
  got = calloc(npages, 1);
  bits = calloc(npages + 64, 8);
  hashes = calloc(npages, 8);
  readbuf = malloc(256 * P);
  int c[2], a[2], i[2];
  if (pipe(c) || pipe(a) || pipe(i)) return 2;
  child = fork();
  if (child == 0) app(c[0], a[1], i[1]);
  cmd_fd = c[1];
  ack_fd = a[0];
  if (read(i[0], &base, sizeof base) != sizeof base) return 2;
  dev = open(CKPT_DIRTY_DEVICE, O_RDWR);

  struct tracker trackers[] = {
      {"kmod", kmod_reset, kmod_collect},
      {"soft-dirty", clear_refs, sd_collect},
      {"hash", hash_reset, hash_collect},
      {"tlb-flush", flush_reset, NULL},
  };
  const int nt = sizeof trackers / sizeof trackers[0];
  char why[256] = "";
  for (int t = 0; t < nt && !why[0]; t++) {
    struct tracker* tr = &trackers[t];
    double fw[3] = {0}, rw[3] = {0}, col[3] = {0}, rs[3] = {0};
    for (int rep = 0; rep < 3 && !why[0]; rep++) {
      double t0 = now();
      if (tr->reset()) snprintf(why, sizeof why, "%s: reset failed: %s", tr->name, strerror(errno));
      rs[rep] = (now() - t0) * 1e3;
      fw[rep] = app_write_all();  // first write after the reset
      rw[rep] = app_write_all();  // second write: no tracking cost left
      if (!tr->collect) continue;
      // Collect after 10 % random writes (first reset what the full pass did).
      if (tr->reset()) snprintf(why, sizeof why, "%s: reset failed", tr->name);
      app_write_random();
      if (tr == &trackers[0] || tr == &trackers[1]) freeze();
      t0 = now();
      int r = tr->collect();
      col[rep] = (now() - t0) * 1e3;
      if (tr == &trackers[0] || tr == &trackers[1]) thaw();
      if (r && !why[0])
        snprintf(why, sizeof why, "%s: collect failed: %s", tr->name, strerror(errno));
      size_t fn = 0, fp = 0;
      for (size_t p = 0; p < npages; p++) fn += want[p] && !got[p], fp += !want[p] && got[p];
      if ((fn || fp) && !why[0])
        snprintf(why, sizeof why, "%s: collect wrong: %zu missed, %zu extra of %u written",
                 tr->name, fn, fp, nchosen);
    }
    if (why[0]) break;
    qsort(fw, 3, sizeof(double), cmp_double);
    qsort(rw, 3, sizeof(double), cmp_double);
    qsort(col, 3, sizeof(double), cmp_double);
    qsort(rs, 3, sizeof(double), cmp_double);
    tr->first_write_ns = fw[1];
    tr->rewrite_ns = rw[1];
    tr->collect_ms = col[1];
    tr->reset_ms = rs[1];
    if (!tr->collect) tr->collect_ms = 0;
    printf(
        "KTEST INFO bench %-10s first write %8.0f ns/page, rewrite %6.0f ns/page, "
        "collect (10%% of %zu pages) %8.2f ms, reset %7.2f ms\n",
        tr->name, tr->first_write_ns, tr->rewrite_ns, npages, tr->collect_ms, tr->reset_ms);
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  if (why[0]) {
    printf("KTEST FAIL bench.dirty: %s\n", why);
    return 1;
  }
  struct tracker *k = &trackers[0], *s = &trackers[1], *h = &trackers[2], *f = &trackers[3];
  printf("KTEST INFO bench json {\"pages\": %zu", npages);
  for (int t = 0; t < nt; t++)
    printf(
        ", \"%s\": {\"first_write_ns\": %.0f, \"rewrite_ns\": %.0f, \"collect_ms\": %.3f, "
        "\"reset_ms\": %.3f}",
        trackers[t].name, trackers[t].first_write_ns, trackers[t].rewrite_ns,
        trackers[t].collect_ms, trackers[t].reset_ms);
  printf("}\n");
  printf(
      "KTEST PASS bench.dirty (first write: soft-dirty/kmod %.1fx, kmod/untracked-after-flush "
      "%.2fx, kmod/untracked-warm %.1fx; collect: hash/kmod %.1fx, soft-dirty/kmod %.1fx)\n",
      s->first_write_ns / k->first_write_ns, k->first_write_ns / f->first_write_ns,
      k->first_write_ns / h->first_write_ns, h->collect_ms / k->collect_ms,
      s->collect_ms / k->collect_ms);
  return 0;
}
