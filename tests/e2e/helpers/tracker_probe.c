// tracker_probe: which dirty-page trackers this kernel supports, found by
// the plainest use of each interface, independently of the library's own
// probes (cr_check). Prints their names on one line, in cr_check's order.
// trackers.sh compares the two: a broken probe in the library must fail a
// test, not turn the tests of a tracker into skips.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

// Newer than Debian 12's headers (kernel ABI, Linux 6.7).
struct page_region { uint64_t start, end, categories; };
struct pm_scan_arg {
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN_IOCTL _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_WRITTEN (1 << 1)
#define FEATURE_WP_UNPOPULATED (1ull << 13)
#define FEATURE_WP_ASYNC (1ull << 15)

static int pagemap_scan(void) {
  long psz = sysconf(_SC_PAGESIZE);
  char* p = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 0;
  int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (uffd < 0) return 0;
  struct uffdio_api api = {.api = UFFD_API, .features = FEATURE_WP_ASYNC | FEATURE_WP_UNPOPULATED};
  struct uffdio_register reg = {.range = {(uint64_t)p, (uint64_t)psz}, .mode = UFFDIO_REGISTER_MODE_WP};
  struct uffdio_writeprotect wp = {.range = {(uint64_t)p, (uint64_t)psz}, .mode = UFFDIO_WRITEPROTECT_MODE_WP};
  int ok = ioctl(uffd, UFFDIO_API, &api) == 0 && ioctl(uffd, UFFDIO_REGISTER, &reg) == 0 &&
           ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) == 0;
  if (ok) {
    p[0] = 1;  // a write under asynchronous protection: no fault to handle
    int pm = open("/proc/self/pagemap", O_RDONLY);
    struct page_region r[4];
    struct pm_scan_arg a = {.size = sizeof a, .start = (uint64_t)p, .end = (uint64_t)p + psz,
                            .vec = (uint64_t)r, .vec_len = 4, .category_mask = PAGE_IS_WRITTEN,
                            .return_mask = PAGE_IS_WRITTEN};
    ok = pm >= 0 && ioctl(pm, PAGEMAP_SCAN_IOCTL, &a) == 1 && r[0].start == (uint64_t)p;
    if (pm >= 0) close(pm);
  }
  close(uffd);
  return ok;
}

static int soft_dirty(void) {
  long psz = sysconf(_SC_PAGESIZE);
  volatile char* p = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 0;
  p[0] = 1;
  int cr = open("/proc/self/clear_refs", O_WRONLY);
  if (cr < 0 || write(cr, "4", 1) != 1) return 0;
  close(cr);
  p[0] = 2;
  int pm = open("/proc/self/pagemap", O_RDONLY);
  uint64_t e = 0;
  int ok = pm >= 0 && pread(pm, &e, 8, (off_t)((uintptr_t)p / psz * 8)) == 8 && (e >> 55 & 1);
  if (pm >= 0) close(pm);
  return ok;
}

int main(void) {
  struct stat st;
  const char* sep = "";
  if (stat("/dev/ckpt_dirty", &st) == 0) printf("%skmod", sep), sep = " ";
  if (pagemap_scan()) printf("%spagemap-scan", sep), sep = " ";
  if (soft_dirty()) printf("%ssoft-dirty", sep), sep = " ";
  printf("%shash\n", sep);
  return 0;
}
