// The ckpt_dirty module's own tests, run as root inside the Debian-kernel
// guest (tests/kernel/run_guest.sh) with the module loaded.
//
// kmod_test PATH_TO_KO
//
// A child process ("target") holds memory and writes, drops or reads pages on
// command; this process is its ptrace tracer (the module's permission rule)
// and compares what the module reports with what it told the child to do.
// Prints one line per test: "KTEST PASS kmod.NAME (detail)" or
// "KTEST FAIL kmod.NAME: reason". Exit status 0 when all passed.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt_dirty.h"

#define P 4096UL
#define NPAGES 4096  // 16 MiB of small pages
#define HUGE (2UL << 20)
#define NHUGE 4  // 8 MiB meant for transparent huge pages

static int failures;
static const char* ko_path;
static int dev = -1;

static void result(int ok, const char* name, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (ok)
    printf("KTEST PASS kmod.%s (%s)\n", name, buf);
  else
    printf("KTEST FAIL kmod.%s: %s\n", name, buf);
  fflush(stdout);
  failures += !ok;
}

// ---- the target ----

enum {
  OP_WRITE = 'w',
  OP_DROP = 'd',
  OP_READ_PIPE = 'r',
  OP_FORK_WRITE = 'f',
  OP_EXEC = 'x',
  OP_EXIT = 'q',
  OP_THREAD_WRITE = 't',
  OP_HUGE_WRITE = 'h',
  OP_HUGE_DROP = 'H',
  OP_FILL = 'F'
};

struct cmd {
  char op;
  uint32_t page;
};

struct target {
  pid_t pid;
  int cmd, ack, data;    // data: the pipe the child read()s into its memory from
  uint64_t small, huge;  // addresses in the child
};

static char* t_small;
static char* t_huge;

// The writer thread spins on CPU 1 and never sleeps, so its TLB keeps the
// translation (with the dirty bit) it used last: only the module's TLB flush
// makes its next write set the bit again.
static volatile uint32_t t_req_page, t_req_seq, t_done_seq;
static void* writer_thread(void* arg) {
  (void)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(1, &set);
  sched_setaffinity(0, sizeof set, &set);  // best effort: another CPU than the main thread
  uint32_t seen = 0;
  for (;;) {
    uint32_t seq = __atomic_load_n(&t_req_seq, __ATOMIC_ACQUIRE);
    if (seq == seen) continue;
    t_small[t_req_page * P + 100]++;
    seen = seq;
    __atomic_store_n(&t_done_seq, seq, __ATOMIC_RELEASE);
  }
  return NULL;
}

static void target_main(int cmdfd, int ackfd, int datafd, int infofd) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof set, &set);
  t_small = mmap(NULL, NPAGES * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(t_small, NPAGES * P, MADV_NOHUGEPAGE);
  char* raw =
      mmap(NULL, (NHUGE + 1) * HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  t_huge = (char*)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
  madvise(t_huge, NHUGE * HUGE, MADV_HUGEPAGE);
  for (unsigned i = 0; i < NPAGES; i++) t_small[i * P] = 1;
  for (unsigned i = 0; i < NHUGE * HUGE / P; i++) t_huge[i * P] = 1;
  // Fresh pages sit in a per-CPU LRU batch (holding a reference) for a while;
  // push the tested ones out with some more.
  char* filler = mmap(NULL, 256 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (unsigned i = 0; i < 256; i++) filler[i * P] = 1;
  pthread_t th;
  pthread_create(&th, NULL, writer_thread, NULL);
  uint64_t info[2] = {(uintptr_t)t_small, (uintptr_t)t_huge};
  (void)!write(infofd, info, sizeof info);
  struct cmd c;
  while (read(cmdfd, &c, sizeof c) == sizeof c) {
    switch (c.op) {
      case OP_WRITE:
        t_small[c.page * P + 7]++;
        break;
      case OP_DROP:
        madvise(t_small + c.page * P, P, MADV_DONTNEED);
        break;
      case OP_READ_PIPE:
        (void)!read(datafd, t_small + c.page * P + 64, 16);
        break;
      case OP_HUGE_WRITE:
        t_huge[c.page * P + 9]++;
        break;
      case OP_HUGE_DROP:
        madvise(t_huge + c.page * P, P, MADV_DONTNEED);
        break;
      case OP_THREAD_WRITE: {
        t_req_page = c.page;
        uint32_t seq = t_req_seq + 1;
        __atomic_store_n(&t_req_seq, seq, __ATOMIC_RELEASE);
        while (__atomic_load_n(&t_done_seq, __ATOMIC_ACQUIRE) != seq) {
        }
        break;
      }
      case OP_FORK_WRITE: {
        // A child of the target writes its copies of pages c.page..+9 and
        // exits; then the target itself writes page c.page + 20.
        pid_t g = fork();
        if (g == 0) {
          for (unsigned i = 0; i < 10; i++) t_small[(c.page + i) * P + 11]++;
          _exit(0);
        }
        waitpid(g, NULL, 0);
        t_small[(c.page + 20) * P + 11]++;
        break;
      }
      case OP_EXEC:
        execl("/proc/self/exe", "kmod_test", "--idle", (char*)NULL);
        _exit(99);
      case OP_FILL: {
        // Fault in fresh pages: pushes recently faulted ones out of the
        // per-CPU LRU batch, whose reference the module counts as a possible
        // writer (a false positive, never a miss).
        char* f = mmap(NULL, 64 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        for (unsigned i = 0; i < 64; i++) f[i * P] = 1;
        break;
      }
      case OP_EXIT:
        _exit(0);
    }
    (void)!write(ackfd, "k", 1);
  }
  _exit(0);
}

static int target_start(struct target* t) {
  int c[2], a[2], d[2], i[2];
  if (pipe(c) || pipe(a) || pipe(d) || pipe(i)) return -1;
  t->pid = fork();
  if (t->pid == 0) {
    close(dev);  // an open /dev/ckpt_dirty would pin the module (the unload test)
    close(c[1]);
    close(a[0]);
    close(d[1]);
    close(i[0]);
    target_main(c[0], a[1], d[0], i[1]);
  }
  close(c[0]);
  close(a[1]);
  close(d[0]);
  close(i[1]);
  t->cmd = c[1];
  t->ack = a[0];
  t->data = d[1];
  uint64_t info[2];
  if (read(i[0], info, sizeof info) != sizeof info) return -1;
  close(i[0]);
  t->small = info[0];
  t->huge = info[1];
  return 0;
}

static void target_op(struct target* t, char op, uint32_t page) {
  struct cmd c = {op, page};
  char k;
  if (write(t->cmd, &c, sizeof c) != sizeof c || read(t->ack, &k, 1) != 1) {
    fprintf(stderr, "kmod_test: the target stopped answering\n");
    exit(2);
  }
}

static void target_end(struct target* t) {
  if (t->pid <= 0) return;
  kill(t->pid, SIGKILL);
  waitpid(t->pid, NULL, 0);
  close(t->cmd);
  close(t->ack);
  close(t->data);
  t->pid = 0;
}

// ---- the module ----

// The module answers the process itself or its ptrace tracer: every request
// runs with the target seized and stopped, as a checkpointer does it.
static int stop_sig;
static int freeze(pid_t pid) {
  int st;
  stop_sig = 0;
  if (pid == getpid()) return 0;
  if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0) return -errno;
  if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) != 0 || waitpid(pid, &st, __WALL) != pid) return -errno;
  if (!WIFSTOPPED(st)) return -ESRCH;
  if (st >> 16 == 0) stop_sig = WSTOPSIG(st);  // a signal's delivery: hand it back
  return 0;
}
static void thaw(pid_t pid) {
  if (pid != getpid()) ptrace(PTRACE_DETACH, pid, 0, stop_sig);
}

static int ck_start(pid_t pid, uint64_t* token) {
  struct ckpt_dirty_start a = {.pid = pid};
  freeze(pid);
  int e = ioctl(dev, CKPT_DIRTY_IOC_START, &a) != 0 ? -errno : 0;
  thaw(pid);
  if (!e) *token = a.token;
  return e;
}

static int ck_stop(pid_t pid) {
  struct ckpt_dirty_stop a = {.pid = pid};
  freeze(pid);
  int e = ioctl(dev, CKPT_DIRTY_IOC_STOP, &a) != 0 ? -errno : 0;
  thaw(pid);
  return e;
}

// Collects [start, start + n pages) into bits (n bits). Returns 0 or -errno.
static int ck_collect(pid_t pid, uint64_t* token, uint64_t start, size_t n, uint64_t* bits,
                      uint32_t* status) {
  struct ckpt_dirty_collect a = {.pid = pid,
                                 .token = *token,
                                 .start = start,
                                 .end = start + n * P,
                                 .bitmap = (uintptr_t)bits,
                                 .bitmap_bits = (n + 63) / 64 * 64};
  memset(bits, 0, (n + 63) / 64 * 8);
  freeze(pid);
  int e = ioctl(dev, CKPT_DIRTY_IOC_COLLECT, &a) != 0 ? -errno : 0;
  thaw(pid);
  if (e) return e;
  *token = a.token;
  if (status) *status = a.status;
  return 0;
}

static int bit(const uint64_t* b, size_t i) {
  return (b[i / 64] >> (i % 64)) & 1;
}

// Compares the reported bits with `want` (n pages); describes the first
// differences into why. Returns 1 when equal.
static int same(const uint64_t* got, const uint8_t* want, size_t n, char* why, size_t len) {
  size_t fn = 0, fp = 0, first_fn = 0, first_fp = 0;
  for (size_t i = 0; i < n; i++) {
    int g = bit(got, i);
    if (want[i] && !g && !fn++) first_fn = i;
    if (!want[i] && g && !fp++) first_fp = i;
  }
  snprintf(why, len, "%zu missed (first page %zu), %zu extra (first page %zu)", fn, first_fn, fp,
           first_fp);
  return fn == 0 && fp == 0;
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static uint64_t bits[NPAGES / 64 + 1];
static uint64_t hbits[NHUGE * HUGE / P / 64];

// ---- tests ----

// Runs `what` in a child as uid (and gid 65534, supplementary group `group`
// unless -1): "open" opens the device; "sessions N" opens it, and N
// grandchildren each START tracking of themselves in turn, the first
// failure's errno or 0. Returns the child's errno result (0: all worked).
static int as_user(uid_t uid, int group, const char* what) {
  int out[2];
  if (pipe(out)) return -1;
  pid_t c = fork();
  if (c == 0) {
    gid_t g = (gid_t)group;
    if (setgroups(group >= 0 ? 1 : 0, &g) || setgid(65534) || setuid(uid)) _exit(1);
    int fd = open(CKPT_DIRTY_DEVICE, O_RDWR);
    int e = fd < 0 ? errno : 0;
    int n = 0;
    if (!e && sscanf(what, "sessions %d", &n) == 1) {
      pid_t kids[16];
      for (int i = 0; i < n && i < 16 && !e; i++) {
        int r[2];
        if (pipe(r)) _exit(1);
        kids[i] = fork();
        if (kids[i] == 0) {
          struct ckpt_dirty_start a = {.pid = getpid()};
          int ke = ioctl(fd, CKPT_DIRTY_IOC_START, &a) != 0 ? errno : 0;
          (void)!write(r[1], &ke, sizeof ke);
          pause();  // keeps its session until killed
          _exit(0);
        }
        if (read(r[0], &e, sizeof e) != sizeof e) e = EIO;
        close(r[0]);
        close(r[1]);
        if (e) n = i + 1;
      }
      for (int i = 0; i < n && i < 16; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
      }
    }
    (void)!write(out[1], &e, sizeof e);
    _exit(0);
  }
  int e = -1;
  close(out[1]);
  if (read(out[0], &e, sizeof e) != sizeof e) e = -1;
  close(out[0]);
  waitpid(c, NULL, 0);
  return e;
}

static void test_version(void) {
  struct ckpt_dirty_version v;
  int ok = ioctl(dev, CKPT_DIRTY_IOC_VERSION, &v) == 0 && v.version == CKPT_DIRTY_VERSION &&
           v.page_size == P;
  result(ok, "version", "interface %u, page %u, max range %llu GiB", v.version, v.page_size,
         (unsigned long long)(v.max_range >> 30));
}

static void test_permission(void) {
  // A child we do not trace: refused. Ourselves: allowed.
  pid_t c = fork();
  if (c == 0) {
    pause();
    _exit(0);
  }
  uint64_t tok;
  struct ckpt_dirty_start a = {.pid = c};
  int e = ioctl(dev, CKPT_DIRTY_IOC_START, &a) != 0 ? -errno : 0;
  int self = ck_start(getpid(), &tok);
  ck_stop(getpid());
  kill(c, SIGKILL);
  waitpid(c, NULL, 0);
  result(e == -EPERM && self == 0, "permission", "untraced process: %s; the caller itself: %s",
         strerror(-e), self ? strerror(-self) : "ok");
}

// The device is root's unless the module was loaded with a trusted group.
static void test_access(void) {
  struct stat st;
  int mode = stat(CKPT_DIRTY_DEVICE, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
  int e = as_user(65534, -1, "open");
  result(mode == 0600 && e == EACCES, "access", "device mode %o; open by uid 65534: %s", mode,
         e ? strerror(e) : "allowed");
}

// COLLECT with a non-zero reserved field: EINVAL, nothing spent.
static void test_reserved(struct target* t) {
  uint64_t tok, b[1];
  int e1 = ck_start(t->pid, &tok);
  struct ckpt_dirty_collect a = {.pid = t->pid,
                                 .token = tok,
                                 .start = t->small,
                                 .end = t->small + 64 * P,
                                 .bitmap = (uintptr_t)b,
                                 .bitmap_bits = 64,
                                 .reserved = 1};
  int e2 = ioctl(dev, CKPT_DIRTY_IOC_COLLECT, &a) != 0 ? errno : 0;
  int e3 = ck_collect(t->pid, &tok, t->small, 64, bits, NULL);
  result(!e1 && e2 == EINVAL && !e3, "reserved",
         "collect with reserved=1: %s; then with the same token: %s", strerror(e2), strerror(-e3));
}

static void test_random_sets(struct target* t) {
  static uint8_t want[NPAGES];
  uint64_t tok;
  char why[200] = "";
  int e = ck_start(t->pid, &tok), ok = e == 0, rounds = 0;
  const int density[] = {0, 1, 10, 50, 100, 3, 0, 25};
  for (int r = 0; ok && r < 8; r++, rounds++) {
    size_t n = 0;
    for (int i = 0; i < NPAGES; i++) {
      want[i] = (int)(next_rand() % 100) < density[r];
      if (want[i]) {
        target_op(t, OP_WRITE, i);
        n++;
      }
    }
    e = ck_collect(t->pid, &tok, t->small, NPAGES, bits, NULL);
    ok = e == 0 && same(bits, want, NPAGES, why, sizeof why);
    if (!ok)
      snprintf(why + strlen(why), sizeof why - strlen(why), " in round %d (%d%%, %zu pages)", r,
               density[r], n);
  }
  if (e) snprintf(why, sizeof why, "%s", strerror(-e));
  if (ok)
    result(1, "random_sets", "%d rounds of 0-100%% random pages of %d, exact", rounds, NPAGES);
  else
    result(0, "random_sets", "%s", why);
}

static void test_kernel_writes(struct target* t) {
  static uint8_t want[NPAGES];
  uint64_t tok;
  char why[200] = "";
  memset(want, 0, sizeof want);
  int e = ck_start(t->pid, &tok);
  // read() into page 5: copy_to_user through the target's page table.
  (void)!write(t->data, "0123456789abcdef", 16);
  target_op(t, OP_READ_PIPE, 5);
  want[5] = 1;
  // process_vm_writev into page 9: get_user_pages(FOLL_WRITE), no PTE dirty bit.
  char buf[32] = "written from outside";
  struct iovec l = {buf, sizeof buf}, r = {(void*)(uintptr_t)(t->small + 9 * P + 128), sizeof buf};
  long n = process_vm_writev(t->pid, &l, 1, &r, 1, 0);
  want[9] = 1;
  // /proc/PID/mem into page 13 (what a debugger's poke does).
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", t->pid);
  int mem = open(path, O_RDWR);
  long m = mem >= 0 ? pwrite(mem, buf, 8, (off_t)(t->small + 13 * P + 256)) : -1;
  if (mem >= 0) close(mem);
  want[13] = 1;
  if (!e) e = ck_collect(t->pid, &tok, t->small, NPAGES, bits, NULL);
  int ok = !e && n == sizeof buf && m == 8 && same(bits, want, NPAGES, why, sizeof why);
  result(ok, "kernel_writes",
         "read() into page 5, process_vm_writev into 9, /proc/PID/mem into 13: %s",
         e ? strerror(-e) : why);
}

static void test_dropped(struct target* t) {
  static uint8_t want[NPAGES];
  uint64_t tok;
  char why[200] = "";
  memset(want, 0, sizeof want);
  int e = ck_start(t->pid, &tok);
  target_op(t, OP_DROP, 20);
  want[20] = 1;
  if (!e) e = ck_collect(t->pid, &tok, t->small, NPAGES, bits, NULL);
  int ok = !e && same(bits, want, NPAGES, why, sizeof why);
  result(ok, "madv_dontneed", "a page dropped with MADV_DONTNEED: %s", e ? strerror(-e) : why);
  target_op(t, OP_WRITE, 20);  // populated again for the tests after this one
  target_op(t, OP_FILL, 0);
}

static void test_other_cpu(struct target* t) {
  // A thread on another CPU writes page 30, the module resets it, the same
  // thread writes it again: only a TLB flush on that CPU makes the CPU set
  // the dirty bit the second time.
  static uint8_t want[NPAGES];
  uint64_t tok;
  char why[200] = "";
  int e = ck_start(t->pid, &tok), ok = !e;
  for (int r = 0; ok && r < 5; r++) {
    memset(want, 0, sizeof want);
    target_op(t, OP_THREAD_WRITE, 30);
    want[30] = 1;
    e = ck_collect(t->pid, &tok, t->small, NPAGES, bits, NULL);
    ok = !e && same(bits, want, NPAGES, why, sizeof why);
  }
  result(ok, "tlb_other_cpu", "5 rounds of write, collect from another CPU: %s",
         e ? strerror(-e) : why);
}

static int thp_pages(pid_t pid, uint64_t addr) {
  // AnonHugePages of the VMA holding addr, in kB.
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/smaps", pid);
  FILE* f = fopen(path, "r");
  int in = 0, kb = -1;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      in = addr >= a && addr < b;
      continue;
    }
    if (in && sscanf(line, "AnonHugePages: %d kB", &kb) == 1) break;
  }
  if (f) fclose(f);
  return kb;
}

static void test_thp(struct target* t) {
  static uint8_t want[NHUGE * HUGE / P];
  const size_t n = NHUGE * HUGE / P;
  uint64_t tok;
  char why[200] = "";
  int kb = thp_pages(t->pid, t->huge);
  if (kb < (int)(NHUGE * HUGE / 1024)) {
    result(0, "thp",
           "the target got %d kB of huge pages, wanted %lu (THP is always-on in Debian's kernel)",
           kb, NHUGE * HUGE / 1024);
    return;
  }
  int e = ck_start(t->pid, &tok);
  // One write in huge pages 1 and 3: reported as all their 512 small pages.
  memset(want, 0, sizeof want);
  target_op(t, OP_HUGE_WRITE, 512 + 17);
  target_op(t, OP_HUGE_WRITE, 3 * 512 + 500);
  for (size_t i = 0; i < 512; i++) want[512 + i] = want[3 * 512 + i] = 1;
  if (!e) e = ck_collect(t->pid, &tok, t->huge, n, hbits, NULL);
  int ok = !e && same(hbits, want, n, why, sizeof why);
  result(ok, "thp_write", "huge pages written once each reported whole (%d kB THP): %s", kb,
         e ? strerror(-e) : why);
  // Quiet round: nothing.
  memset(want, 0, sizeof want);
  if (!e) e = ck_collect(t->pid, &tok, t->huge, n, hbits, NULL);
  ok = !e && same(hbits, want, n, why, sizeof why);
  result(ok, "thp_quiet", "no writes, nothing reported: %s", e ? strerror(-e) : why);
  // A 4 KiB hole punched into huge page 2 splits it: the page is reported
  // (the rest of that huge page may be, too: the split is a change).
  target_op(t, OP_HUGE_DROP, 2 * 512 + 40);
  target_op(t, OP_HUGE_WRITE, 2 * 512 + 300);  // and a write into the split page table
  if (!e) e = ck_collect(t->pid, &tok, t->huge, n, hbits, NULL);
  ok = !e && bit(hbits, 2 * 512 + 40) && bit(hbits, 2 * 512 + 300);
  size_t outside = 0;
  for (size_t i = 0; i < n; i++) outside += bit(hbits, i) && (i < 2 * 512 || i >= 3 * 512);
  ok = ok && outside == 0;
  result(ok, "thp_split",
         "hole and write after a split reported, %zu pages outside that huge page%s", outside,
         e ? strerror(-e) : "");
  // After the split: exact 4 KiB tracking in that range.
  memset(want, 0, sizeof want);
  target_op(t, OP_HUGE_WRITE, 2 * 512 + 301);
  want[2 * 512 + 301] = 1;
  want[2 * 512 + 40] = 1;  // still no PTE: always reported
  if (!e) e = ck_collect(t->pid, &tok, t->huge, n, hbits, NULL);
  ok = !e && same(hbits, want, n, why, sizeof why);
  result(ok, "thp_after_split", "4 KiB exact after the split: %s", e ? strerror(-e) : why);
}

static void test_fork(struct target* t) {
  static uint8_t want[NPAGES];
  uint64_t tok;
  char why[200] = "";
  memset(want, 0, sizeof want);
  int e = ck_start(t->pid, &tok);
  // The target forks; its child writes pages 100..109 (its own copies) and
  // exits; the target writes page 120.
  target_op(t, OP_FORK_WRITE, 100);
  want[120] = 1;
  if (!e) e = ck_collect(t->pid, &tok, t->small, NPAGES, bits, NULL);
  int ok = !e && same(bits, want, NPAGES, why, sizeof why);
  result(ok, "fork", "a forked child's writes are not the target's; the target's COW write is: %s",
         e ? strerror(-e) : why);
  // After the fork the target's pages are shared copy-on-write until it
  // writes them: writes must still be seen.
  memset(want, 0, sizeof want);
  for (int p = 100; p < 110; p += 3) {
    target_op(t, OP_WRITE, p);
    want[p] = 1;
  }
  if (!e) e = ck_collect(t->pid, &tok, t->small, NPAGES, bits, NULL);
  ok = !e && same(bits, want, NPAGES, why, sizeof why);
  result(ok, "fork_cow", "writes to pages shared with a (gone) child: %s", e ? strerror(-e) : why);
}

static void test_token(struct target* t) {
  uint64_t t1, t2, old;
  int e1 = ck_start(t->pid, &t1);
  old = t1;
  int e2 = ck_collect(t->pid, &t1, t->small, 64, bits, NULL);
  t2 = old;
  int e3 = ck_collect(t->pid, &t2, t->small, 64, bits, NULL);  // a spent token
  int e4 = ck_collect(t->pid, &t1, t->small, 64, bits, NULL);  // the newest one
  // A restore continues a chain: START with the caller's token.
  struct ckpt_dirty_start a = {.pid = t->pid, .flags = CKPT_DIRTY_START_TOKEN, .token = 12345};
  freeze(t->pid);
  int e5 = ioctl(dev, CKPT_DIRTY_IOC_START, &a) != 0 ? -errno : 0;
  thaw(t->pid);
  uint64_t t3 = 12345;
  int e6 = ck_collect(t->pid, &t3, t->small, 64, bits, NULL);
  result(!e1 && !e2 && e3 == -ESTALE && !e4 && old > 0 && old < (1ULL << 31) && !e5 && !e6 &&
             a.token == 12345,
         "token",
         "start %s, collect %s, spent token %s, newest %s, start with a given token %s, collect "
         "with it %s",
         strerror(-e1), strerror(-e2), strerror(-e3), strerror(-e4), strerror(-e5), strerror(-e6));
}

static void test_exec(void) {
  struct target t;
  uint64_t tok;
  if (target_start(&t)) {
    result(0, "exec", "cannot start a target");
    return;
  }
  int e1 = ck_start(t.pid, &tok);
  struct cmd c = {OP_EXEC, 0};
  (void)!write(t.cmd, &c, sizeof c);
  // Wait until the new image runs: its argv ends in "--idle".
  char path[64], buf[64] = "";
  snprintf(path, sizeof path, "/proc/%d/cmdline", t.pid);
  for (int i = 0; i < 500; i++) {
    FILE* f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    if (n > strlen(buf) + 1 && !strcmp(buf + strlen(buf) + 1, "--idle")) break;
    usleep(10000);
  }
  int e2 = ck_collect(t.pid, &tok, t.small, 64, bits, NULL);
  target_end(&t);
  result(!e1 && e2 == -ENOENT, "exec", "collect after exec: %s (want ENOENT: a new address space)",
         strerror(-e2));
}

static int sessions(void) {
  FILE* f = fopen("/sys/module/ckpt_dirty/parameters/sessions", "r");
  int n = -1;
  if (f) {
    if (fscanf(f, "%d", &n) != 1) n = -1;
    fclose(f);
  }
  return n;
}

static void test_exit(void) {
  struct target t;
  uint64_t tok;
  ck_stop(getpid());  // frees the sessions of targets already gone
  int before = sessions();
  if (target_start(&t)) {
    result(0, "exit", "cannot start a target");
    return;
  }
  int e1 = ck_start(t.pid, &tok);
  int during = sessions();
  pid_t pid = t.pid;
  target_end(&t);  // exits while tracked
  int e2 = ck_collect(pid, &tok, 0x10000, 64, bits, NULL);
  // Any START/STOP frees sessions of address spaces that are gone.
  ck_stop(getpid());
  int after = sessions();
  result(!e1 && e2 == -ESRCH && during == before + 1 && after == before, "exit",
         "collect after exit: %s; sessions %d -> %d -> %d", strerror(-e2), before, during, after);
}

static int run(const char* cmd) {
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int set_param(const char* name, const char* value) {
  char path[128];
  snprintf(path, sizeof path, "/sys/module/ckpt_dirty/parameters/%s", name);
  FILE* f = fopen(path, "w");
  if (!f) return -1;
  int ok = fputs(value, f) >= 0;
  return fclose(f) == 0 && ok ? 0 : -1;
}

// Loaded with trusted_gid: members of that group may open the device (mode
// 0666), others still not; a non-root user's sessions are limited by
// max_user_sessions (EDQUOT), root's are not. Loads the module back as it was.
static void test_trusted_group(void) {
  char cmd[512];
  close(dev);
  int rm = run("rmmod ckpt_dirty");
  snprintf(cmd, sizeof cmd, "insmod %s trusted_gid=4242", ko_path);
  int ins = run(cmd);
  struct stat st;
  int mode = stat(CKPT_DIRTY_DEVICE, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
  int member = as_user(65534, 4242, "open");
  int other = as_user(65533, -1, "open");
  int lim = set_param("max_user_sessions", "2");
  int two = as_user(65534, 4242, "sessions 2");
  int three = as_user(65534, 4242, "sessions 3");
  dev = open(CKPT_DIRTY_DEVICE, O_RDWR);
  uint64_t tok;
  int root = ck_start(getpid(), &tok);  // root: not limited
  ck_stop(getpid());
  close(dev);
  int rm2 = run("rmmod ckpt_dirty");
  snprintf(cmd, sizeof cmd, "insmod %s", ko_path);
  int ins2 = run(cmd);
  dev = open(CKPT_DIRTY_DEVICE, O_RDWR);
  result(!rm && !ins && mode == 0666 && member == 0 && other == EACCES && !lim && two == 0 &&
             three == EDQUOT && !root && !rm2 && !ins2 && dev >= 0,
         "trusted_group",
         "mode %o; open by a member: %s, by another user: %s; 2 sessions of a user (limit 2): "
         "%s, 3: %s; root: %s",
         mode, member ? strerror(member) : "ok", other ? strerror(other) : "allowed",
         two ? strerror(two) : "ok", three ? strerror(three) : "allowed",
         root ? strerror(-root) : "ok");
}

static void test_unload(void) {
  // Unload with live tracking, the target keeps writing, load again.
  struct target t;
  uint64_t tok;
  if (target_start(&t)) {
    result(0, "unload", "cannot start a target");
    return;
  }
  int e1 = ck_start(t.pid, &tok);
  target_op(&t, OP_WRITE, 1);
  close(dev);
  int rm = run("rmmod ckpt_dirty");
  for (int i = 0; i < 50; i++) target_op(&t, OP_WRITE, i);  // still alive and working
  char cmd[512];
  snprintf(cmd, sizeof cmd, "insmod %s", ko_path);
  int ins = run(cmd);
  dev = open(CKPT_DIRTY_DEVICE, O_RDWR);
  int e2 = dev >= 0 ? ck_collect(t.pid, &tok, t.small, 64, bits, NULL) : -errno;
  target_end(&t);
  result(!e1 && rm == 0 && ins == 0 && e2 == -ENOENT, "unload",
         "rmmod while tracking: %d, target kept running, insmod: %d, old session: %s", rm, ins,
         strerror(-e2));
}

int main(int argc, char** argv) {
  if (argc == 2 && !strcmp(argv[1], "--idle")) {
    pause();
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: kmod_test PATH_TO_ckpt_dirty.ko\n");
    return 2;
  }
  ko_path = argv[1];
  setvbuf(stdout, NULL, _IOLBF, 0);
  dev = open(CKPT_DIRTY_DEVICE, O_RDWR);
  if (dev < 0) {
    result(0, "open", "%s: %s", CKPT_DIRTY_DEVICE, strerror(errno));
    return 1;
  }
  test_version();
  test_access();
  test_permission();
  struct target t;
  if (target_start(&t)) {
    result(0, "target", "cannot start the target: %s", strerror(errno));
    return 1;
  }
  test_random_sets(&t);
  test_kernel_writes(&t);
  test_dropped(&t);
  test_other_cpu(&t);
  test_thp(&t);
  test_fork(&t);
  test_token(&t);
  test_reserved(&t);
  target_end(&t);
  test_exec();
  test_exit();
  test_unload();
  test_trusted_group();
  return failures ? 1 : 0;
}
