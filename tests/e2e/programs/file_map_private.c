// file_map_private READY [DIR]: creates DIR/file_map_private.dat (DIR defaults
// to the ready file's directory), maps it MAP_PRIVATE read-write and closes the
// fd. Pages fall in four classes: rewritten (COW), one byte changed (COW),
// read only (shared with the page cache), never touched. After ready it waits
// ~2 s, then checks every page and that the file on disk is unchanged
// (private writes must never reach the file).
#include <libgen.h>
#include <sys/mman.h>

#include "e2e.h"

#define PAGES 64
#define HOLD_MS 2000

static long page_size;

static uint8_t file_byte(int page, long i) {
  return (uint8_t)e2e_mix(((uint64_t)page << 20) | i);
}
static uint8_t cow_byte(int page, long i) {
  return (uint8_t)~e2e_mix(((uint64_t)page << 24) | i);
}
static long poke_offset(int page) {
  return (page * 37L) % page_size;
}

enum { REWRITTEN, POKED, READ_ONLY, UNTOUCHED };
static int page_class(int page) {
  return page % 4;
}

static uint8_t expected_byte(int page, long i) {
  switch (page_class(page)) {
    case REWRITTEN:
      return cow_byte(page, i);
    case POKED:
      return i == poke_offset(page) ? (uint8_t)~file_byte(page, i) : file_byte(page, i);
    default:
      return file_byte(page, i);
  }
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 1, "READY [DIR]");
  page_size = sysconf(_SC_PAGESIZE);
  char ready_copy[4096], path[4096];
  snprintf(ready_copy, sizeof ready_copy, "%s", argv[1]);
  const char* dir = argc > 2 ? argv[2] : dirname(ready_copy);
  snprintf(path, sizeof path, "%s/file_map_private.dat", dir);
  const size_t size = (size_t)PAGES * page_size;

  uint8_t* content = malloc(size);
  if (!content) e2e_fail("malloc failed");
  for (int p = 0; p < PAGES; p++)
    for (long i = 0; i < page_size; i++) content[p * page_size + i] = file_byte(p, i);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) e2e_fail("create %s: %s", path, strerror(errno));
  if (write(fd, content, size) != (ssize_t)size) e2e_fail("write %s failed", path);

  uint8_t* map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
  close(fd);

  volatile uint8_t sink = 0;
  for (int p = 0; p < PAGES; p++) {
    uint8_t* page = map + p * page_size;
    switch (page_class(p)) {
      case REWRITTEN:
        for (long i = 0; i < page_size; i++) page[i] = cow_byte(p, i);
        break;
      case POKED:
        page[poke_offset(p)] = ~page[poke_offset(p)];
        break;
      case READ_ONLY:
        for (long i = 0; i < page_size; i += 512) sink += page[i];
        break;
    }
  }

  if (e2e_sabotage()) map[READ_ONLY * page_size + 100] ^= 0x01;
  e2e_ready(argv[1]);
  for (int i = 0; i < HOLD_MS / 10; i++) e2e_sleep_ms(10);

  for (int p = 0; p < PAGES; p++) {
    for (long i = 0; i < page_size; i++) {
      uint8_t got = map[p * page_size + i];
      if (got != expected_byte(p, i))
        e2e_fail("page %d (class %d) byte %ld is %#x, expected %#x", p, page_class(p), i, got,
                 expected_byte(p, i));
    }
  }
  fd = open(path, O_RDONLY);
  if (fd < 0) e2e_fail("reopen %s: %s", path, strerror(errno));
  uint8_t* now = malloc(size);
  if (!now || pread(fd, now, size, 0) != (ssize_t)size) e2e_fail("read back %s failed", path);
  close(fd);
  if (memcmp(now, content, size) != 0) e2e_fail("%s changed on disk: private writes leaked", path);

  // Pages never written must still be the file's own (page cache) pages: a
  // write to the file shows through them (Linux behaviour; POSIX leaves it
  // open), never through the private copies.
  fd = open(path, O_RDWR);
  if (fd < 0) e2e_fail("reopen %s: %s", path, strerror(errno));
  const long at = 11;
  for (int p = 0; p < 4; p++) {
    uint8_t b = (uint8_t)~file_byte(p, at);
    if (pwrite(fd, &b, 1, p * page_size + at) != 1) e2e_fail("pwrite %s failed", path);
  }
  close(fd);
  for (int p = 0; p < 4; p++) {
    int shared = page_class(p) == READ_ONLY || page_class(p) == UNTOUCHED;
    uint8_t want = shared ? (uint8_t)~file_byte(p, at) : expected_byte(p, at);
    if (map[p * page_size + at] != want)
      e2e_fail("page %d (class %d): a write to the file %s", p, page_class(p),
               shared ? "does not show through (no longer file-backed)" : "shows through");
  }
  e2e_done();
}
