// fd_tmpfiles READY DIR [MAP_KIB]: files a job keeps in its session
// directory, which may be gone by the time it is restored. Before ready it
// makes DIR/sess (0750) and DIR/sess/sub (0700), works in DIR/sess/sub, and
// holds there:
//   fd 3  data.txt (0640) read-write at offset 7
//   fd 4  fifo, a FIFO (0600) opened read-write, with 5 bytes not yet read
//   fd 5  pid.lock (0644), flock'd, holding "PID\n"
//   map.bin (0600, MAP_KIB KiB, default 64), mapped shared and written
// then waits ~2 s (the driver checkpoints, removes DIR/sess, kills and
// restores meanwhile) and checks every file's content, mode, offset, the
// FIFO's data, the mapping against the file, and its working directory.
#define _GNU_SOURCE
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "e2e.h"

#define HOLD_MS 2000

static const char kData[] = "0123456789 temporary data";

static void expect_mode(const char* path, mode_t want) {
  struct stat st;
  if (stat(path, &st) != 0) e2e_fail("stat %s: %s", path, strerror(errno));
  if ((st.st_mode & 07777) != want)
    e2e_fail("%s: mode %o, expected %o", path, st.st_mode & 07777, (unsigned)want);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY DIR [MAP_KIB]");
  const size_t map_len = (argc > 3 ? (size_t)atol(argv[3]) : 64) * 1024;
  char sess[3000], sub[3100];
  snprintf(sess, sizeof sess, "%s/sess", argv[2]);
  snprintf(sub, sizeof sub, "%s/sub", sess);
  umask(0);
  if (mkdir(sess, 0750) != 0 || mkdir(sub, 0700) != 0 || chdir(sub) != 0)
    e2e_fail("making %s: %s", sub, strerror(errno));
  for (int fd = 3; fd <= 5; fd++) close(fd);
  int d = open("data.txt", O_RDWR | O_CREAT | O_EXCL, 0640);
  if (d != 3 || write(d, kData, sizeof kData) != (ssize_t)sizeof kData ||
      lseek(d, 7, SEEK_SET) != 7)
    e2e_fail("data.txt at fd 3: %s", strerror(errno));
  if (mkfifo("fifo", 0600) != 0) e2e_fail("mkfifo: %s", strerror(errno));
  int f = open("fifo", O_RDWR | O_NONBLOCK);
  if (f != 4 || write(f, "hello", 5) != 5) e2e_fail("fifo at fd 4: %s", strerror(errno));
  int l = open("pid.lock", O_RDWR | O_CREAT | O_EXCL, 0644);
  char pidline[32];
  int n = snprintf(pidline, sizeof pidline, "%d\n", (int)getpid());
  if (l != 5 || flock(l, LOCK_EX | LOCK_NB) != 0 || write(l, pidline, (size_t)n) != n)
    e2e_fail("pid.lock at fd 5: %s", strerror(errno));
  int m = open("map.bin", O_RDWR | O_CREAT | O_EXCL, 0600);
  if (m < 0 || ftruncate(m, (off_t)map_len) != 0) e2e_fail("map.bin: %s", strerror(errno));
  uint64_t* map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0);
  if (map == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
  close(m);
  for (size_t i = 0; i < map_len / 8; i++) map[i] = e2e_mix(i);
  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);
  e2e_hold();

  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd) || strcmp(cwd, sub) != 0)
    e2e_fail("working directory %s, expected %s", cwd, sub);
  expect_mode(sess, 0750);
  expect_mode(sub, 0700);
  expect_mode("data.txt", 0640);
  expect_mode("fifo", 0600);
  expect_mode("map.bin", 0600);
  char buf[sizeof kData];
  if (lseek(3, 0, SEEK_CUR) != 7) e2e_fail("data.txt: offset is not 7");
  if (pread(3, buf, sizeof buf, 0) != (ssize_t)sizeof buf || memcmp(buf, kData, sizeof buf) != 0)
    e2e_fail("data.txt: content differs");
  if (read(4, buf, 8) != 5 || memcmp(buf, "hello", 5) != 0) e2e_fail("fifo: unread data lost");
  if (pread(5, buf, (size_t)n, 0) != n || memcmp(buf, pidline, (size_t)n) != 0)
    e2e_fail("pid.lock: content differs");
  int other = open("pid.lock", O_RDONLY);
  if (other < 0 || flock(other, LOCK_EX | LOCK_NB) == 0) e2e_fail("pid.lock: not locked");
  close(other);
  int mm = open("map.bin", O_RDONLY);
  for (size_t i = 0; i < map_len / 8; i++) {
    uint64_t v;
    if (map[i] != e2e_mix(i)) e2e_fail("map.bin mapping: word %zu differs", i);
    if (pread(mm, &v, 8, (off_t)(i * 8)) != 8 || v != e2e_mix(i))
      e2e_fail("map.bin file: word %zu differs from the mapping", i);
  }
  close(mm);
  e2e_done();
}
