// incr_layout READY_DIR: a memory layout that changes between incremental
// checkpoints, and keeps its own copy of every generation's memory so that a
// restore of ANY generation can be compared byte for byte.
//
// A seeded PRNG (E2E_SEED, default 1) drives rounds 0..11. Each round mutates
// the regions the program manages:
//   - random page writes (whole pages, a few bytes, a zeroed page, one byte
//     flipped) across all regions;
//   - mmap of new anonymous regions, partly written (some at an address the
//     program unmapped earlier: stale content there must not come back);
//   - munmap of whole regions and of holes in the middle (the region splits);
//   - mremap: moved (to a fresh or a formerly mapped address) while growing or
//     shrinking, and grown or shrunk in place;
//   - MAP_FIXED replacement of part or all of a region by a fresh anonymous
//     mapping, written only partly (the rest must read as zeros);
//   - MADV_DONTNEED of anonymous pages (zeros afterwards);
//   - brk grown and shrunk with sbrk, with writes in the new part (pages given
//     back and grown again must read as zeros);
//   - a MAP_PRIVATE mapping of READY_DIR/incr_layout.data: COW writes, then
//     MADV_DONTNEED on written pages (they must read back the FILE content, not
//     zeros), the whole mapping replaced by itself (MAP_FIXED), moved,
//     unmapped, mapped again elsewhere.
// Some rounds (3, 7, 10) are quiet: a handful of page writes and nothing else,
// so their incremental checkpoint must be small.
//
// After round k's mutations the program saves READY_DIR/round-k.copy (write(2)
// + fsync): a header, then for every region its descriptor and its bytes, then
// the ranges it unmapped and did not map again (which must stay unmapped), and
// the brk end. It is written straight from memory (no buffer that would dirty
// pages of its own), and anonymous pages that are not populated (pagemap) as
// zeros without touching them, so the checkpoint sees the real layout. Then
// it creates READY_DIR/round-k.ready by rename, one line: "<pid> <nonce>
// quiet=Q regions=R pages=P unmapped=U brk=B ops=<this round's operations>",
// and polls every 5 ms (at most 60 s of polling) for READY_DIR/go-k. When go-k
// appears: if READY_DIR/verify-k exists (the driver restored this round's
// generation), it compares every region with round-k.copy, checks that the
// unmapped ranges are unmapped and that the brk end is the same, prints
// "verified round k" and ends as every e2e program does (PID and fds
// unchanged, "done <pid> <nonce>"); otherwise it goes on with round k+1. After
// the last round it ends the same way. A mismatch exits 1 with one line on
// stderr naming the region, the page and where the found content came from
// (an older/newer round's copy at that address, zeros, or the file).
//
// TEST_SABOTAGE=1 flips one byte of round 5's copy (not of memory): restoring
// generation 6 must then fail verification.
//
// No malloc between rounds: the program moves the break itself, and glibc's
// allocator must not grow or trim it in between (stdio is used only at the end,
// after the break is back where it started).
#include "e2e.h"  // first: it defines _GNU_SOURCE (mremap, MAP_FIXED_NOREPLACE)

#include <sys/mman.h>

#define ROUNDS 12
#define SABOTAGE_ROUND 5
#define MAX_REGIONS 96
#define MAX_GONE 512
#define FILE_PAGES 64
#define MAX_FILE_REGIONS 3
#define ANON_BUDGET 2048  // pages of anonymous regions before munmaps are forced
#define BRK_MAX_PAGES 256
#define POLL_MS 5
#define POLL_LIMIT (60 * 1000 / POLL_MS)
#define COPY_MAGIC "INCRCPY1"

enum { K_ANON = 1, K_FILE = 2, K_BRK = 3 };

struct region {
  uint64_t addr, len;
  uint32_t kind, id;
  uint64_t file_off;  // K_FILE: offset of addr in the file
};
struct gone {
  uint64_t addr, len;
  uint32_t from_brk, pad;
};
struct copy_header {
  char magic[8];
  uint32_t round, nregions, ngone, pad;
  uint64_t brk_base, brk_end;
};

static long ps;
static const char* dir;
static char data_path[4096];
static struct region regs[MAX_REGIONS];
static int nregs;
static struct gone gones[MAX_GONE];
static int ngone;
static uint32_t next_id = 1;
static uint64_t rng;
static uint8_t* brk_base;
static uint8_t* brk_cur;
static int cur_round;

static uint8_t iobuf[1 << 20];
static uint8_t iobuf2[1 << 20];
static uint64_t pmbuf[(1 << 20) / 4096];

static uint64_t rnd(void) {
  return e2e_mix(rng++);
}
static uint64_t below(uint64_t n) {
  return n ? rnd() % n : 0;
}
static const char* kind_name(uint32_t k) {
  return k == K_ANON ? "anon" : k == K_FILE ? "file" : k == K_BRK ? "brk" : "?";
}
static uint8_t file_byte(uint64_t off) {
  return (uint8_t)(e2e_mix(off / 8) >> (8 * (off % 8)));
}

// ---- region table and unmapped ranges ----

static int add_region(uint64_t addr, uint64_t len, uint32_t kind, uint64_t file_off) {
  if (nregs == MAX_REGIONS) e2e_fail("round %d: more than %d regions", cur_round, MAX_REGIONS);
  regs[nregs] = (struct region){addr, len, kind, next_id++, file_off};
  return nregs++;
}
static void del_region(int i) {
  memmove(&regs[i], &regs[i + 1], (size_t)(nregs - i - 1) * sizeof regs[0]);
  nregs--;
}
static int count_kind(uint32_t kind) {
  int n = 0;
  for (int i = 0; i < nregs; i++) n += regs[i].kind == kind;
  return n;
}
// A random region of `kind` with at least min_pages pages, or -1.
static int pick_region(uint32_t kind, uint64_t min_pages) {
  int cand[MAX_REGIONS], n = 0;
  for (int i = 0; i < nregs; i++)
    if (regs[i].kind == kind && regs[i].len >= min_pages * ps) cand[n++] = i;
  return n ? cand[below(n)] : -1;
}
// 1 if [addr, addr+len) lies inside one VMA (/proc/self/maps), as mremap
// requires: MAP_FIXED replacements and the kernel's merging of neighbours make
// a region span several VMAs, or share one with its neighbours.
static char maps_buf[1 << 18];
static int in_one_vma(uint64_t addr, uint64_t len) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) e2e_fail("open /proc/self/maps: %s", strerror(errno));
  size_t used = 0;
  ssize_t r;
  while ((r = read(fd, maps_buf + used, sizeof maps_buf - 1 - used)) > 0) used += (size_t)r;
  close(fd);
  if (r < 0) e2e_fail("read /proc/self/maps: %s", strerror(errno));
  maps_buf[used] = '\0';
  for (char* line = maps_buf; *line;) {
    char* end;
    uint64_t start = strtoull(line, &end, 16);
    uint64_t stop = strtoull(end + 1, &end, 16);
    if (start <= addr && addr + len <= stop) return 1;
    char* nl = strchr(line, '\n');
    if (!nl) break;
    line = nl + 1;
  }
  return 0;
}
// A random region of `kind`, at least min_pages long and inside one VMA, or -1.
static int pick_remappable(uint32_t kind, uint64_t min_pages) {
  int cand[MAX_REGIONS], n = 0;
  for (int i = 0; i < nregs; i++)
    if (regs[i].kind == kind && regs[i].len >= min_pages * ps &&
        in_one_vma(regs[i].addr, regs[i].len))
      cand[n++] = i;
  return n ? cand[below(n)] : -1;
}
static int brk_index(void) {
  for (int i = 0; i < nregs; i++)
    if (regs[i].kind == K_BRK) return i;
  e2e_fail("no brk region");
}

static void gone_add(uint64_t addr, uint64_t len, int from_brk) {
  if (len == 0 || ngone == MAX_GONE) return;  // checking fewer ranges is still correct
  gones[ngone++] = (struct gone){addr, len, (uint32_t)from_brk, 0};
}
// [addr, addr+len) is mapped again: no longer expected to be unmapped.
static void gone_remove(uint64_t addr, uint64_t len) {
  uint64_t end = addr + len;
  for (int i = 0; i < ngone; i++) {
    struct gone g = gones[i];
    uint64_t gend = g.addr + g.len;
    if (gend <= addr || g.addr >= end) continue;
    // Keep the parts outside [addr, end): left in place, right appended.
    if (g.addr < addr) {
      gones[i].len = addr - g.addr;
      if (gend > end) gone_add(end, gend - end, (int)g.from_brk);
    } else if (gend > end) {
      gones[i].addr = end;
      gones[i].len = gend - end;
    } else {
      gones[i] = gones[--ngone];
      i--;
    }
  }
}

static uint64_t anon_pages(void) {
  uint64_t n = 0;
  for (int i = 0; i < nregs; i++)
    if (regs[i].kind == K_ANON) n += regs[i].len / ps;
  return n;
}

// ---- writes ----

static void write_page(uint8_t* p) {
  uint64_t mode = below(10), off, n;
  switch (mode) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:  // the whole page
      for (long i = 0; i < ps; i += 8) {
        uint64_t v = rnd();
        memcpy(p + i, &v, 8);
      }
      break;
    case 6:
    case 7:  // a few bytes somewhere
      off = below(ps);
      n = 1 + below(ps - off < 512 ? ps - off : 512);
      for (uint64_t i = 0; i < n; i++) p[off + i] = (uint8_t)rnd();
      break;
    case 8:  // zeroed (present, but costs no content bytes)
      memset(p, 0, ps);
      break;
    default:  // one byte flipped
      p[below(ps)] ^= (uint8_t)(1 + below(255));
      break;
  }
}
// Writes each page of [addr, addr+pages) with probability 1/every.
static void write_some(uint64_t addr, uint64_t pages, uint64_t every) {
  for (uint64_t i = 0; i < pages; i++)
    if (below(every) == 0) write_page((uint8_t*)(addr + i * ps));
}
static void random_writes(uint64_t count) {
  uint64_t total = 0;
  for (int i = 0; i < nregs; i++) total += regs[i].len / ps;
  if (total == 0) return;
  for (uint64_t c = 0; c < count; c++) {
    uint64_t page = below(total);
    for (int i = 0; i < nregs; i++) {
      uint64_t n = regs[i].len / ps;
      if (page < n) {
        write_page((uint8_t*)(regs[i].addr + page * ps));
        break;
      }
      page -= n;
    }
  }
}

// ---- layout changes ----

static void* map_anon(void* at, uint64_t len, int flags) {
  return mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
}
// A PROT_NONE reservation of len bytes, at a formerly mapped (non-brk) address
// when one is large enough and `reuse`, else wherever the kernel puts it.
static uint64_t reserve(uint64_t len, int reuse) {
  if (reuse) {
    int cand[MAX_GONE], n = 0;
    for (int i = 0; i < ngone; i++)
      if (!gones[i].from_brk && gones[i].len >= len) cand[n++] = i;
    if (n) {
      struct gone g = gones[cand[below(n)]];
      uint64_t at = g.addr + below((g.len - len) / ps + 1) * ps;
      void* p =
          mmap((void*)at, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == (void*)at) return at;
      if (p != MAP_FAILED) munmap(p, len);
    }
  }
  void* p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    e2e_fail("round %d: reserve %llu bytes: %s", cur_round, (unsigned long long)len,
             strerror(errno));
  return (uint64_t)p;
}

static void op_mmap_new(int reuse) {
  uint64_t pages = 1 + below(128);
  uint64_t at = reserve(pages * ps, reuse);  // then replaced: a plain anonymous mapping
  if (map_anon((void*)at, pages * ps, MAP_FIXED) != (void*)at)
    e2e_fail("round %d: mmap: %s", cur_round, strerror(errno));
  gone_remove(at, pages * ps);
  add_region(at, pages * ps, K_ANON, 0);
  write_some(at, pages, 2);
}

static void op_munmap(void) {
  if (count_kind(K_ANON) < 3) return;
  int i = pick_region(K_ANON, 1);
  if (munmap((void*)regs[i].addr, regs[i].len) != 0)
    e2e_fail("round %d: munmap: %s", cur_round, strerror(errno));
  gone_add(regs[i].addr, regs[i].len, 0);
  del_region(i);
}

static void op_munmap_hole(void) {
  int i = pick_region(K_ANON, 6);
  if (i < 0) return;
  uint64_t n = regs[i].len / ps, h = 1 + below(n - 2), max = n - 1 - h;
  uint64_t hl = 1 + below(max < 16 ? max : 16), a = regs[i].addr;
  if (munmap((void*)(a + h * ps), hl * ps) != 0)
    e2e_fail("round %d: munmap hole: %s", cur_round, strerror(errno));
  gone_add(a + h * ps, hl * ps, 0);
  regs[i].len = h * ps;
  add_region(a + (h + hl) * ps, (n - h - hl) * ps, K_ANON, 0);
}

static void op_mremap_move(void) {
  int i = pick_remappable(K_ANON, 1);
  if (i < 0) return;
  uint64_t n = regs[i].len / ps, old = regs[i].addr;
  int64_t delta = (int64_t)below(2 * (n / 2 + 8) + 1) - (int64_t)(n / 2 + 8);
  uint64_t n2 = (int64_t)n + delta < 1 ? 1 : (uint64_t)((int64_t)n + delta);
  uint64_t to = reserve(n2 * ps, below(3) == 0);
  void* p = mremap((void*)old, n * ps, n2 * ps, MREMAP_MAYMOVE | MREMAP_FIXED, (void*)to);
  if (p != (void*)to) e2e_fail("round %d: mremap move: %s", cur_round, strerror(errno));
  gone_add(old, n * ps, 0);
  gone_remove(to, n2 * ps);
  regs[i].addr = to;
  regs[i].len = n2 * ps;
  if (n2 > n) write_some(to + n * ps, n2 - n, 2);
  write_some(to, n2 < n ? n2 : n, 8);
}

static void op_mremap_inplace(void) {
  int i = pick_remappable(K_ANON, 1);
  if (i < 0) return;
  uint64_t n = regs[i].len / ps, a = regs[i].addr;
  if (n >= 2 && below(2)) {
    uint64_t n2 = 1 + below(n - 1);
    if (mremap((void*)a, n * ps, n2 * ps, 0) != (void*)a)
      e2e_fail("round %d: mremap shrink: %s", cur_round, strerror(errno));
    gone_add(a + n2 * ps, (n - n2) * ps, 0);
    regs[i].len = n2 * ps;
  } else {
    uint64_t n2 = n + 1 + below(16);
    if (mremap((void*)a, n * ps, n2 * ps, 0) != (void*)a) return;  // the next mapping is in the way
    gone_remove(a + n * ps, (n2 - n) * ps);
    regs[i].len = n2 * ps;
    write_some(a + n * ps, n2 - n, 2);
  }
}

static void op_fixed_replace(void) {
  int i = pick_region(K_ANON, 1);
  if (i < 0) return;
  uint64_t n = regs[i].len / ps, off = below(n), m = 1 + below(n - off);
  if (below(3) == 0) off = 0, m = n;
  uint64_t at = regs[i].addr + off * ps;
  if (map_anon((void*)at, m * ps, MAP_FIXED) != (void*)at)
    e2e_fail("round %d: MAP_FIXED: %s", cur_round, strerror(errno));
  write_some(at, m, 3);
}

static void op_dontneed(void) {
  int i = below(4) == 0 ? brk_index() : pick_region(K_ANON, 1);
  if (i < 0 || regs[i].len == 0) return;
  uint64_t n = regs[i].len / ps, off = below(n), m = 1 + below(n - off < 32 ? n - off : 32);
  if (madvise((void*)(regs[i].addr + off * ps), m * ps, MADV_DONTNEED) != 0)
    e2e_fail("round %d: MADV_DONTNEED: %s", cur_round, strerror(errno));
}

static void brk_move(int64_t pages) {
  int b = brk_index();
  if (sbrk((intptr_t)pages * ps) == (void*)-1)
    e2e_fail("round %d: sbrk(%lld pages): %s", cur_round, (long long)pages, strerror(errno));
  uint8_t* old = brk_cur;
  brk_cur = sbrk(0);
  if (brk_cur != old + pages * ps)
    e2e_fail("round %d: sbrk moved the break to %p, not %p", cur_round, (void*)brk_cur,
             (void*)(old + pages * ps));
  regs[b].len = (uint64_t)(brk_cur - brk_base);
  if (pages > 0) {
    gone_remove((uint64_t)old, (uint64_t)pages * ps);
    write_some((uint64_t)old, (uint64_t)pages, 2);
  } else {
    gone_add((uint64_t)brk_cur, (uint64_t)-pages * ps, 1);
  }
}

static void op_brk(void) {
  int64_t cur = (brk_cur - brk_base) / ps;
  switch (below(3)) {
    case 0:  // grow
      if (cur < BRK_MAX_PAGES) brk_move(1 + (int64_t)below(48));
      break;
    case 1:  // shrink
      if (cur > 0) brk_move(-(1 + (int64_t)below(cur < 48 ? cur : 48)));
      break;
    default:  // shrink, then grow over what was given back
      if (cur > 0) {
        int64_t s = 1 + (int64_t)below(cur < 32 ? cur : 32);
        brk_move(-s);
        brk_move(1 + (int64_t)below(s + 16));
      }
      break;
  }
}

static uint64_t map_file(uint64_t at, uint64_t pages, uint64_t off, int flags) {
  int fd = open(data_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) e2e_fail("open %s: %s", data_path, strerror(errno));
  void* p =
      mmap((void*)at, pages * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | flags, fd, (off_t)off);
  if (p == MAP_FAILED) e2e_fail("round %d: mmap of the file: %s", cur_round, strerror(errno));
  close(fd);
  return (uint64_t)p;
}

static void op_file(void) {
  int i = pick_region(K_FILE, 1);
  uint64_t n = regs[i].len / ps, a = regs[i].addr;
  // COW writes, then MADV_DONTNEED on a range holding at least one of them:
  // those pages must read back the file's content.
  uint64_t first = below(n);
  write_page((uint8_t*)(a + first * ps));
  write_some(a, n, 6);
  uint64_t off = below(first + 1), m = first - off + 1 + below(n - first);
  if (madvise((void*)(a + off * ps), m * ps, MADV_DONTNEED) != 0)
    e2e_fail("round %d: MADV_DONTNEED on the file mapping: %s", cur_round, strerror(errno));
  write_some(a, n, 10);  // COW pages again, some of them right after the zap
  switch (below(5)) {
    case 0:  // the whole mapping replaced by a fresh mapping of the same file range
      map_file(a, n, regs[i].file_off, MAP_FIXED);
      write_some(a, n, 8);
      break;
    case 1: {  // moved, same size
      if (!in_one_vma(a, n * ps)) break;
      uint64_t to = reserve(n * ps, below(2));
      if (mremap((void*)a, n * ps, n * ps, MREMAP_MAYMOVE | MREMAP_FIXED, (void*)to) != (void*)to)
        e2e_fail("round %d: mremap of the file mapping: %s", cur_round, strerror(errno));
      gone_add(a, n * ps, 0);
      gone_remove(to, n * ps);
      regs[i].addr = to;
      break;
    }
    case 2:  // another mapping of part of the file
      if (count_kind(K_FILE) < MAX_FILE_REGIONS) {
        uint64_t pages = 1 + below(FILE_PAGES), foff = below(FILE_PAGES - pages + 1) * ps;
        uint64_t at = map_file(reserve(pages * ps, below(2)), pages, foff, MAP_FIXED);
        gone_remove(at, pages * ps);
        add_region(at, pages * ps, K_FILE, foff);
        write_some(at, pages, 3);
      }
      break;
    case 3:  // one unmapped
      if (count_kind(K_FILE) > 1) {
        if (munmap((void*)a, n * ps) != 0)
          e2e_fail("round %d: munmap of the file mapping: %s", cur_round, strerror(errno));
        gone_add(a, n * ps, 0);
        del_region(i);
      }
      break;
    default:
      break;
  }
}

enum {
  OP_MMAP_NEW,
  OP_MMAP_REUSE,
  OP_MUNMAP,
  OP_HOLE,
  OP_MREMAP_MOVE,
  OP_MREMAP_INPLACE,
  OP_FIXED,
  OP_DONTNEED,
  OP_BRK,
  OP_FILE,
  NOPS
};

static const char* const op_names[NOPS] = {
    "mmap",           "mmap-reuse", "munmap",   "munmap-hole", "mremap-move",
    "mremap-inplace", "map-fixed",  "dontneed", "brk",         "file"};
static char op_log[1024];  // this round's operations, for the ready file
static void log_op(const char* name) {
  size_t len = strlen(op_log);
  if (len + strlen(name) + 2 < sizeof op_log)
    snprintf(op_log + len, sizeof op_log - len, "%s%s", len ? "," : "", name);
}

static void run_op(int op) {
  log_op(op_names[op]);
  switch (op) {
    case OP_MMAP_NEW:
      op_mmap_new(0);
      break;
    case OP_MMAP_REUSE:
      op_mmap_new(1);
      break;
    case OP_MUNMAP:
      op_munmap();
      break;
    case OP_HOLE:
      op_munmap_hole();
      break;
    case OP_MREMAP_MOVE:
      op_mremap_move();
      break;
    case OP_MREMAP_INPLACE:
      op_mremap_inplace();
      break;
    case OP_FIXED:
      op_fixed_replace();
      break;
    case OP_DONTNEED:
      op_dontneed();
      break;
    case OP_BRK:
      op_brk();
      break;
    default:
      op_file();
      break;
  }
}

static int quiet_round(int k) {
  return k == 3 || k == 7 || k == 10;
}

static void mutate(int k) {
  op_log[0] = '\0';
  if (k == 0) {
    log_op("setup");
    for (int i = 0; i < 6; i++) op_mmap_new(0);
    brk_move(32);
    uint64_t at = map_file(0, FILE_PAGES - 8, 8 * ps, 0);
    gone_remove(at, (FILE_PAGES - 8) * ps);
    add_region(at, (FILE_PAGES - 8) * ps, K_FILE, 8 * ps);
    write_some(at, FILE_PAGES - 8, 2);
    random_writes(300);
    return;
  }
  if (quiet_round(k)) {
    log_op("quiet");
    random_writes(1 + below(4));
    return;
  }
  random_writes(100 + below(400));
  int seq[3 * NOPS + 3], n = 0;
  for (int op = 0; op < NOPS; op++)
    for (uint64_t c = below(3); c > 0; c--) seq[n++] = op;
  for (int j = 0; j < 3; j++) seq[n++] = (k * 3 + j) % NOPS;  // every op in some round
  for (int j = n - 1; j > 0; j--) {
    int r = (int)below(j + 1), t = seq[j];
    seq[j] = seq[r];
    seq[r] = t;
  }
  for (int j = 0; j < n; j++) {
    run_op(seq[j]);
    random_writes(below(8));
  }
  while (anon_pages() > ANON_BUDGET && count_kind(K_ANON) >= 3) {
    log_op("munmap(budget)");
    op_munmap();
  }
}

// ---- the copy ----

static void write_all(int fd, const void* buf, size_t len, const char* what) {
  const uint8_t* p = buf;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) e2e_fail("write %s: %s", what, strerror(errno));
    p += w;
    len -= (size_t)w;
  }
}
static void read_all(int fd, void* buf, size_t len, const char* what) {
  uint8_t* p = buf;
  while (len > 0) {
    ssize_t r = read(fd, p, len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) e2e_fail("read %s: %s", what, strerror(errno));
    if (r == 0) e2e_fail("read %s: file too short", what);
    p += r;
    len -= (size_t)r;
  }
}

static void copy_path(char* out, size_t size, int k) {
  snprintf(out, size, "%s/round-%d.copy", dir, k);
}

// The region's bytes into fd, written straight from memory: a buffer would
// dirty pages of its own every round, which a quiet round's incremental would
// then have to save. Anonymous pages that are not populated (pagemap) are
// written as zeros from a buffer that is never written, without being read
// (reading would populate them).
static const uint8_t zeros[1 << 16];
static void save_region(int fd, int pm, const struct region* r, const char* what) {
  uint64_t pages = r->len / ps;
  for (uint64_t done = 0; done < pages;) {
    uint64_t chunk = pages - done < sizeof pmbuf / 8 ? pages - done : sizeof pmbuf / 8;
    uint64_t a = r->addr + done * ps;
    if (r->kind != K_FILE &&
        pread(pm, pmbuf, chunk * 8, (off_t)(a / ps * 8)) != (ssize_t)(chunk * 8))
      e2e_fail("read /proc/self/pagemap: %s", strerror(errno));
    for (uint64_t i = 0; i < chunk;) {
      int populated = r->kind == K_FILE || (pmbuf[i] >> 62) != 0;  // present or swapped
      uint64_t j = i + 1;
      while (j < chunk && (r->kind == K_FILE || (pmbuf[j] >> 62) != 0) == populated) j++;
      if (populated) {
        write_all(fd, (const void*)(a + i * ps), (j - i) * ps, what);
      } else {
        for (uint64_t z = i; z < j; z += sizeof zeros / ps) {
          uint64_t n = j - z < sizeof zeros / ps ? j - z : sizeof zeros / ps;
          write_all(fd, zeros, n * ps, what);
        }
      }
      i = j;
    }
    done += chunk;
  }
}

static void save_copy(int k) {
  char path[4200], tmp[4300];
  copy_path(path, sizeof path, k);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) e2e_fail("create %s: %s", tmp, strerror(errno));
  int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pm < 0) e2e_fail("open /proc/self/pagemap: %s", strerror(errno));
  struct copy_header h = {COPY_MAGIC, (uint32_t)k,        (uint32_t)nregs,  (uint32_t)ngone,
                          0,          (uint64_t)brk_base, (uint64_t)brk_cur};
  write_all(fd, &h, sizeof h, tmp);
  off_t sabotage_at = -1;
  for (int i = 0; i < nregs; i++) {
    write_all(fd, &regs[i], sizeof regs[i], tmp);
    if (sabotage_at < 0 && regs[i].len > 0) sabotage_at = lseek(fd, 0, SEEK_CUR) + ps / 2;
    save_region(fd, pm, &regs[i], tmp);
  }
  write_all(fd, gones, (size_t)ngone * sizeof gones[0], tmp);
  close(pm);
  if (e2e_sabotage() &&
      k == SABOTAGE_ROUND) {  // one byte of the first region's copy, not of memory
    uint8_t b;
    if (pread(fd, &b, 1, sabotage_at) != 1) e2e_fail("sabotage: read back %s", tmp);
    b ^= 0x40;
    if (pwrite(fd, &b, 1, sabotage_at) != 1) e2e_fail("sabotage: write %s", tmp);
  }
  if (fsync(fd) != 0 || close(fd) != 0) e2e_fail("fsync %s: %s", tmp, strerror(errno));
  if (rename(tmp, path) != 0) e2e_fail("rename %s: %s", tmp, strerror(errno));
}

static void signal_ready(int k) {
  char path[4200], tmp[4300], line[1400];
  snprintf(path, sizeof path, "%s/round-%d.ready", dir, k);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  uint64_t pages = 0;
  for (int i = 0; i < nregs; i++) pages += regs[i].len / ps;
  int n = snprintf(line, sizeof line,
                   "%d %016llx quiet=%d regions=%d pages=%llu unmapped=%d brk=%lld ops=%s\n",
                   (int)e2e_pid, e2e_nonce, quiet_round(k), nregs, (unsigned long long)pages, ngone,
                   (long long)((brk_cur - brk_base) / ps), op_log);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) e2e_fail("create %s: %s", tmp, strerror(errno));
  write_all(fd, line, (size_t)n, tmp);
  if (close(fd) != 0) e2e_fail("close %s: %s", tmp, strerror(errno));
  if (rename(tmp, path) != 0) e2e_fail("rename %s: %s", tmp, strerror(errno));
}

static int exists(const char* name, int k) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s-%d", dir, name, k);
  return access(path, F_OK) == 0;
}

// ---- verification ----

// 1 if the page at addr is mapped (mincore fails with ENOMEM on a hole).
static int page_mapped(uint64_t addr) {
  unsigned char v;
  if (mincore((void*)addr, ps, &v) == 0) return 1;
  if (errno != ENOMEM) e2e_fail("mincore: %s", strerror(errno));
  return 0;
}

// Round r's copy of the page at addr, into out: 1 if round r had it mapped.
static int copy_page_at(int r, uint64_t addr, uint8_t* out) {
  char path[4200];
  copy_path(path, sizeof path, r);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct copy_header h;
  int found = 0;
  if (read(fd, &h, sizeof h) == sizeof h && memcmp(h.magic, COPY_MAGIC, 8) == 0) {
    off_t pos = sizeof h;
    for (uint32_t i = 0; i < h.nregions && !found; i++) {
      struct region reg;
      if (pread(fd, &reg, sizeof reg, pos) != sizeof reg) break;
      pos += sizeof reg;
      if (addr >= reg.addr && addr < reg.addr + reg.len)
        found = pread(fd, out, ps, pos + (off_t)(addr - reg.addr)) == ps;
      pos += (off_t)reg.len;
    }
  }
  close(fd);
  return found;
}

static int all_zero(const uint8_t* p, long n) {
  for (long i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

// Where the content found at addr (one page, in `found`) comes from, in words.
static void describe_origin(const struct region* reg, uint64_t addr, const uint8_t* found, int k,
                            char* out, size_t size) {
  static uint8_t other[1 << 16];
  size_t len = 0;
  out[0] = '\0';
  if (all_zero(found, ps)) len += snprintf(out + len, size - len, "; found page is all zeros");
  if (reg->kind == K_FILE) {
    int same = 1;
    uint64_t off = reg->file_off + (addr - reg->addr);
    for (long i = 0; i < ps && same; i++) same = found[i] == file_byte(off + i);
    if (same) len += snprintf(out + len, size - len, "; found page is the file's content");
  }
  int any = 0;
  for (int r = 0; r < ROUNDS && len < size - 40; r++) {
    if (r == k || !copy_page_at(r, addr, other) || memcmp(other, found, ps) != 0) continue;
    len += snprintf(out + len, size - len, "%s%d",
                    any ? "," : "; found page equals the copy of round(s) ", r);
    any = 1;
  }
  if (!any && len < size - 40)
    snprintf(out + len, size - len, "; found page matches no round's copy at this address");
}

static void verify_region(int fd, const struct region* reg, int k, const char* what) {
  uint64_t pages = reg->len / ps;
  for (uint64_t p = 0; p < pages; p++)
    if (!page_mapped(reg->addr + p * ps))
      e2e_fail("round %d: %s region #%u [%#llx, +%#llx): page %llu (+%#llx) is not mapped", k,
               kind_name(reg->kind), reg->id, (unsigned long long)reg->addr,
               (unsigned long long)reg->len, (unsigned long long)p, (unsigned long long)(p * ps));
  uint64_t bad = 0, first = 0, bad_list[8];
  long first_off = -1;
  for (uint64_t done = 0; done < pages;) {
    uint64_t chunk = pages - done < sizeof iobuf2 / ps ? pages - done : sizeof iobuf2 / ps;
    read_all(fd, iobuf2, chunk * ps, what);
    for (uint64_t i = 0; i < chunk; i++) {
      const uint8_t* mem = (const uint8_t*)(reg->addr + (done + i) * ps);
      if (memcmp(mem, iobuf2 + i * ps, ps) == 0) continue;
      if (bad < 8) bad_list[bad] = done + i;
      if (bad++ == 0) {
        first = done + i;
        for (long b = 0; b < ps && first_off < 0; b++)
          if (mem[b] != iobuf2[i * ps + b]) first_off = b;
        memcpy(iobuf, iobuf2 + i * ps, ps);  // keep the expected page
      }
    }
    done += chunk;
  }
  if (bad == 0) return;
  const uint8_t* mem = (const uint8_t*)(reg->addr + first * ps);
  char pages_s[200], origin[600];
  size_t len = 0;
  for (uint64_t i = 0; i < bad && i < 8; i++)
    len += snprintf(pages_s + len, sizeof pages_s - len, "%s%llu", i ? "," : "",
                    (unsigned long long)bad_list[i]);
  if (bad > 8) snprintf(pages_s + len, sizeof pages_s - len, ",...");
  describe_origin(reg, reg->addr + first * ps, mem, k, origin, sizeof origin);
  e2e_fail(
      "round %d: %s region #%u [%#llx, +%#llx) differs from its copy in %llu of %llu pages (%s); "
      "first at +%#llx (page %llu, byte %ld): found 0x%02x, expected 0x%02x%s%s",
      k, kind_name(reg->kind), reg->id, (unsigned long long)reg->addr, (unsigned long long)reg->len,
      (unsigned long long)bad, (unsigned long long)pages, pages_s,
      (unsigned long long)(first * ps + first_off), (unsigned long long)first, first_off,
      mem[first_off], iobuf[first_off], all_zero(iobuf, ps) ? "; expected page is all zeros" : "",
      origin);
}

static void verify(int k) {
  char path[4200];
  copy_path(path, sizeof path, k);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) e2e_fail("open %s: %s", path, strerror(errno));
  struct copy_header h;
  read_all(fd, &h, sizeof h, path);
  if (memcmp(h.magic, COPY_MAGIC, 8) != 0 || h.round != (uint32_t)k)
    e2e_fail("%s is not round %d's copy", path, k);
  if (h.nregions != (uint32_t)nregs || h.ngone != (uint32_t)ngone)
    e2e_fail(
        "round %d: the restored region table has %d regions and %d unmapped ranges, the copy %u "
        "and %u",
        k, nregs, ngone, h.nregions, h.ngone);
  uint64_t pages = 0;
  for (uint32_t i = 0; i < h.nregions; i++) {
    struct region reg;
    read_all(fd, &reg, sizeof reg, path);
    if (memcmp(&reg, &regs[i], sizeof reg) != 0)
      e2e_fail("round %d: region %u of the restored table differs from the copy's", k, i);
    verify_region(fd, &reg, k, path);
    pages += reg.len / ps;
  }
  for (uint32_t i = 0; i < h.ngone; i++) {
    struct gone g;
    read_all(fd, &g, sizeof g, path);
    for (uint64_t a = g.addr; a < g.addr + g.len; a += ps)
      if (page_mapped(a))
        e2e_fail(
            "round %d: [%#llx, +%#llx) was unmapped%s at this round but page +%#llx is mapped "
            "after the restore",
            k, (unsigned long long)g.addr, (unsigned long long)g.len,
            g.from_brk ? " (brk shrunk)" : "", (unsigned long long)(a - g.addr));
  }
  close(fd);
  if ((uint64_t)sbrk(0) != h.brk_end)
    e2e_fail("round %d: the break is %p after the restore, %#llx at the checkpoint", k, sbrk(0),
             (unsigned long long)h.brk_end);
  printf("verified round %d: %u regions, %llu pages, %u unmapped ranges, break +%#llx\n", k,
         h.nregions, (unsigned long long)pages, h.ngone,
         (unsigned long long)(h.brk_end - h.brk_base));
}

// ---- main ----

static void create_data_file(void) {
  snprintf(data_path, sizeof data_path, "%s/incr_layout.data", dir);
  for (uint64_t i = 0; i < (uint64_t)FILE_PAGES * ps; i++) iobuf[i] = file_byte(i);
  int fd = open(data_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) e2e_fail("create %s: %s", data_path, strerror(errno));
  write_all(fd, iobuf, (size_t)FILE_PAGES * ps, data_path);
  if (fsync(fd) != 0 || close(fd) != 0) e2e_fail("fsync %s: %s", data_path, strerror(errno));
}

// Ends as every e2e program does, with the break back where glibc left it.
__attribute__((noreturn)) static void finish(void) {
  if (brk_cur != brk_base && sbrk(brk_base - brk_cur) == (void*)-1)
    e2e_fail("sbrk: %s", strerror(errno));
  e2e_done();
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY_DIR");
  ps = sysconf(_SC_PAGESIZE);
  dir = argv[1];
  const char* seed = getenv("E2E_SEED");
  rng = e2e_mix(seed ? strtoull(seed, NULL, 0) : 1);
  create_data_file();
  // stdio and the allocator set up now; afterwards the break is ours alone.
  printf("%s", "");
  free(malloc(1));
  e2e_nfds = e2e_list_fds(e2e_fds, E2E_MAX_FDS);
  brk_cur = sbrk(0);
  if ((uint64_t)brk_cur % ps != 0) sbrk(ps - (intptr_t)((uint64_t)brk_cur % ps));
  brk_base = brk_cur = sbrk(0);
  add_region((uint64_t)brk_base, 0, K_BRK, 0);

  for (int k = 0; k < ROUNDS; k++) {
    cur_round = k;
    mutate(k);
    save_copy(k);
    signal_ready(k);
    for (long polls = 0; !exists("go", k); polls++) {
      if (polls >= POLL_LIMIT)
        e2e_fail("round %d: no go-%d after %d s", k, k, POLL_LIMIT * POLL_MS / 1000);
      e2e_sleep_ms(POLL_MS);
    }
    if (exists("verify", k)) {
      verify(k);
      finish();
    }
  }
  finish();
}
