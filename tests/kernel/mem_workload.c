// mem_workload READY MIB: the workload of the CRIU comparison (criu_compare.sh).
// Fills MIB MiB of anonymous memory (4 KiB pages: with transparent huge
// pages, one write dirties 2 MiB for every tracker) with non-zero data,
// creates READY, then every 100 ms rewrites 0.1 % of its pages at random,
// until killed. Its stdio should be files (no terminal: CRIU then needs no
// --shell-job).
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mem_workload READY MIB\n");
    return 2;
  }
  size_t pages = strtoul(argv[2], NULL, 10) * 256;
  uint64_t* mem =
      mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  madvise(mem, pages * 4096, MADV_NOHUGEPAGE);
  uint64_t x = 88172645463325252ULL;
  for (size_t i = 0; i < pages * 512; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    mem[i] = x;
  }
  int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 1;
  dprintf(fd, "%d\n", getpid());
  close(fd);
  for (;;) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    for (size_t n = 0; n < pages / 1000; n++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      mem[(x % pages) * 512 + (x >> 40) % 512] = x;
    }
  }
}
