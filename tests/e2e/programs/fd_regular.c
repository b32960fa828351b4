// fd_regular READY DIR: regular files and devices across a checkpoint.
// Before ready it sets up, in DIR:
//   reg.dat      O_RDWR, 64 KiB of pattern, offset 12345
//   ro.txt       O_RDONLY (a file nobody changes), offset 7
//   append.log   O_WRONLY|O_APPEND, 3 lines, offset moved to 0 (appends ignore it)
//   deleted.bin  200 KiB of pattern, then unlinked while open: an O_RDWR fd at
//                offset 5000, a dup of it (shared offset), and a second,
//                separate O_RDONLY open at offset 100
//   shared.map   3 pages mapped MAP_SHARED read-write, pattern written through
//                the mapping
//   a memfd      10000 bytes, offset 333, sealed against shrinking and growing
//   /dev/null, /dev/zero, /dev/urandom
// then waits ~3 s (the driver checkpoints, kills and restores meanwhile) and
// checks every offset, flag, content and that the shared mapping still
// reaches the file (and the deleted file is one inode behind its fds).
#define _GNU_SOURCE
#include <sys/mman.h>
#include <sys/stat.h>

#include "e2e.h"

#define HOLD_MS 3000
#define REG_SIZE (64 * 1024)
#define REG_OFF 12345
#define DEL_SIZE (200 * 1024)
#define DEL_OFF 5000
#define DEL_OFF2 100
#define MAP_PAGES 3

static uint8_t pat(uint64_t salt, size_t i) {
  return (uint8_t)e2e_mix(salt * 1000003 + i);
}

static int open_in(const char* dir, const char* name, int flags) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  int fd = open(p, flags, 0644);
  if (fd < 0) e2e_fail("open %s: %s", p, strerror(errno));
  return fd;
}

static void write_pattern(int fd, uint64_t salt, size_t n) {
  static uint8_t buf[DEL_SIZE];
  for (size_t i = 0; i < n; i++) buf[i] = pat(salt, i);
  if (write(fd, buf, n) != (ssize_t)n) e2e_fail("write pattern %llu", (unsigned long long)salt);
}

static void expect_pattern_at(int fd, uint64_t salt, off_t off, size_t n, const char* what) {
  uint8_t buf[4096];
  if (n > sizeof buf) n = sizeof buf;
  ssize_t got = pread(fd, buf, n, off);
  if (got != (ssize_t)n) e2e_fail("%s: pread %zd of %zu bytes", what, got, n);
  for (size_t i = 0; i < n; i++)
    if (buf[i] != pat(salt, (size_t)off + i))
      e2e_fail("%s: byte %lld differs", what, (long long)off + (long long)i);
}

static void expect_offset(int fd, off_t want, const char* what) {
  off_t now = lseek(fd, 0, SEEK_CUR);
  if (now != want)
    e2e_fail("%s: offset %lld, expected %lld", what, (long long)now, (long long)want);
}

static void expect_flags(int fd, int want, int mask, const char* what) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & mask) != want) e2e_fail("%s: flags 0%o, expected 0%o", what, fl & mask, want);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY DIR");
  const char* dir = argv[2];
  const long page = sysconf(_SC_PAGESIZE);

  int reg = open_in(dir, "reg.dat", O_RDWR | O_CREAT | O_TRUNC);
  write_pattern(reg, 1, REG_SIZE);
  lseek(reg, REG_OFF, SEEK_SET);

  int ro_w = open_in(dir, "ro.txt", O_WRONLY | O_CREAT | O_TRUNC);
  if (write(ro_w, "read-only text file\n", 20) != 20) e2e_fail("write ro.txt");
  close(ro_w);
  int ro = open_in(dir, "ro.txt", O_RDONLY);
  lseek(ro, 7, SEEK_SET);

  int app = open_in(dir, "append.log", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND);
  const char* lines = "line 1\nline 2\nline 3\n";
  if (write(app, lines, strlen(lines)) != (ssize_t)strlen(lines)) e2e_fail("write append.log");
  lseek(app, 0, SEEK_SET);

  int del = open_in(dir, "deleted.bin", O_RDWR | O_CREAT | O_TRUNC);
  write_pattern(del, 2, DEL_SIZE);
  lseek(del, DEL_OFF, SEEK_SET);
  int del_dup = dup(del);
  int del2 = open_in(dir, "deleted.bin", O_RDONLY);
  lseek(del2, DEL_OFF2, SEEK_SET);
  char delpath[4096];
  snprintf(delpath, sizeof delpath, "%s/deleted.bin", dir);
  if (unlink(delpath) != 0) e2e_fail("unlink %s: %s", delpath, strerror(errno));

  int mfd = open_in(dir, "shared.map", O_RDWR | O_CREAT | O_TRUNC);
  if (ftruncate(mfd, MAP_PAGES * page) != 0) e2e_fail("ftruncate shared.map");
  uint8_t* map = mmap(NULL, MAP_PAGES * page, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  if (map == MAP_FAILED) e2e_fail("mmap shared.map: %s", strerror(errno));
  close(mfd);
  for (long i = 0; i < MAP_PAGES * page; i++) map[i] = pat(3, (size_t)i);

  int mem = memfd_create("fd_regular scratch", MFD_ALLOW_SEALING);
  if (mem < 0) e2e_fail("memfd_create: %s", strerror(errno));
  write_pattern(mem, 4, 10000);
  lseek(mem, 333, SEEK_SET);
  if (fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
    e2e_fail("F_ADD_SEALS: %s", strerror(errno));

  int null_fd = open("/dev/null", O_RDWR);
  int zero_fd = open("/dev/zero", O_RDONLY);
  int rnd_fd = open("/dev/urandom", O_RDONLY);
  if (null_fd < 0 || zero_fd < 0 || rnd_fd < 0) e2e_fail("open devices: %s", strerror(errno));

  if (e2e_sabotage()) lseek(reg, REG_OFF + 1, SEEK_SET);
  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);

  // reg.dat: offset, then the bytes there through the fd's own position.
  expect_offset(reg, REG_OFF, "reg.dat");
  expect_flags(reg, O_RDWR, O_ACCMODE | O_APPEND, "reg.dat");
  uint8_t b[256];
  if (read(reg, b, sizeof b) != (ssize_t)sizeof b) e2e_fail("reg.dat: short read");
  for (size_t i = 0; i < sizeof b; i++)
    if (b[i] != pat(1, REG_OFF + i)) e2e_fail("reg.dat: byte %zu after the offset differs", i);

  expect_offset(ro, 7, "ro.txt");
  expect_flags(ro, O_RDONLY, O_ACCMODE, "ro.txt");
  char t[32] = {0};
  if (read(ro, t, 12) != 12 || strcmp(t, "ly text file") != 0) e2e_fail("ro.txt: read \"%s\"", t);

  // append.log: O_APPEND kept, so this lands at the end, not at offset 0.
  expect_flags(app, O_WRONLY | O_APPEND, O_ACCMODE | O_APPEND, "append.log");
  expect_offset(app, 0, "append.log");
  if (write(app, "line 4\n", 7) != 7) e2e_fail("append.log: write");
  {
    int r = open_in(dir, "append.log", O_RDONLY);
    char all[64] = {0};
    ssize_t n = read(r, all, sizeof all - 1);
    close(r);
    if (n != 28 || strcmp(all, "line 1\nline 2\nline 3\nline 4\n") != 0)
      e2e_fail("append.log holds %zd bytes: \"%s\"", n, all);
  }

  // The deleted file: still deleted, same size and content, offsets kept,
  // the dup shares the offset, and the separate open sees the same inode.
  struct stat st, st2;
  if (fstat(del, &st) != 0 || fstat(del2, &st2) != 0) e2e_fail("fstat deleted.bin");
  if (st.st_nlink != 0)
    e2e_fail("deleted.bin has %lu links after restore", (unsigned long)st.st_nlink);
  if (st.st_size != DEL_SIZE) e2e_fail("deleted.bin: size %lld", (long long)st.st_size);
  if (st.st_ino != st2.st_ino || st.st_dev != st2.st_dev)
    e2e_fail("the two opens of deleted.bin are different files now");
  expect_offset(del, DEL_OFF, "deleted.bin");
  expect_offset(del_dup, DEL_OFF, "deleted.bin (dup)");
  expect_offset(del2, DEL_OFF2, "deleted.bin (second open)");
  expect_flags(del2, O_RDONLY, O_ACCMODE, "deleted.bin (second open)");
  for (off_t off = 0; off < DEL_SIZE; off += 4096)
    expect_pattern_at(del, 2, off, 4096, "deleted.bin");
  lseek(del_dup, 777, SEEK_SET);
  expect_offset(del, 777, "deleted.bin after seeking its dup");
  if (pwrite(del, "XYZ", 3, 10) != 3) e2e_fail("deleted.bin: pwrite");
  char xyz[4] = {0};
  if (pread(del2, xyz, 3, 10) != 3 || strcmp(xyz, "XYZ") != 0)
    e2e_fail("deleted.bin: a write through one open is not seen through the other");

  // The shared mapping: content kept, and still shared with the file.
  for (long i = 0; i < MAP_PAGES * page; i++)
    if (map[i] != pat(3, (size_t)i)) e2e_fail("shared.map: mapped byte %ld differs", i);
  map[page + 5] = 0xA5;
  {
    int r = open_in(dir, "shared.map", O_RDONLY);
    uint8_t c = 0;
    if (pread(r, &c, 1, page + 5) != 1 || c != 0xA5)
      e2e_fail("shared.map: a write through the mapping does not reach the file");
    expect_pattern_at(r, 3, 2 * page, 4096, "shared.map on disk");
    close(r);
  }

  // The memfd: content, offset, seals.
  expect_offset(mem, 333, "memfd");
  for (off_t off = 0; off + 4096 <= 10000; off += 4096)
    expect_pattern_at(mem, 4, off, 4096, "memfd");
  if (fcntl(mem, F_GET_SEALS) != (F_SEAL_SHRINK | F_SEAL_GROW))
    e2e_fail("memfd: seals 0x%x", fcntl(mem, F_GET_SEALS));
  if (ftruncate(mem, 20000) != -1 || errno != EPERM) e2e_fail("memfd: F_SEAL_GROW not enforced");

  // Devices.
  if (write(null_fd, "x", 1) != 1 || read(null_fd, b, 1) != 0) e2e_fail("/dev/null misbehaves");
  memset(b, 0xff, sizeof b);
  if (read(zero_fd, b, sizeof b) != (ssize_t)sizeof b) e2e_fail("/dev/zero: short read");
  for (size_t i = 0; i < sizeof b; i++)
    if (b[i]) e2e_fail("/dev/zero gave a non-zero byte");
  uint64_t r1 = 0, r2 = 0;
  if (read(rnd_fd, &r1, 8) != 8 || read(rnd_fd, &r2, 8) != 8 || r1 == r2)
    e2e_fail("/dev/urandom misbehaves");
  e2e_done();
}
