// writer READY MIB PAGES TICK_MS: the workload of bench/criu_compare.sh.
// Fills MIB MiB of private anonymous memory with incompressible data (no page
// zero, no two alike; 4 KiB pages: with transparent huge pages one write
// would dirty 2 MiB for every tool), writes its PID into READY, then every
// TICK_MS rewrites one word in each of PAGES random pages, until killed.
// Its stdio should be files (no terminal: CRIU then needs no --shell-job).
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: writer READY MIB PAGES TICK_MS\n");
    return 2;
  }
  const size_t pages = strtoul(argv[2], NULL, 10) * 256;
  const size_t per_tick = strtoul(argv[3], NULL, 10);
  const long tick_ms = strtol(argv[4], NULL, 10);
  if (pages == 0 || tick_ms <= 0) {
    fprintf(stderr, "writer: MIB and TICK_MS must be positive\n");
    return 2;
  }
  // Descriptors inherited from the caller (a shell's pipes) would tie this
  // process to others for both tools.
  syscall(SYS_close_range, 3u, ~0u, 0u);
  uint64_t* mem =
      mmap(NULL, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  madvise(mem, pages * 4096, MADV_NOHUGEPAGE);
  uint64_t x = 88172645463325252ULL;
  for (size_t i = 0; i < pages * 512; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    mem[i] = x;
  }
  // Written then renamed: a reader never sees a half-written PID.
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 1;
  dprintf(fd, "%d\n", getpid());
  close(fd);
  if (rename(tmp, argv[1]) != 0) return 1;
  for (;;) {
    struct timespec ts = {tick_ms / 1000, (tick_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    for (size_t n = 0; n < per_tick; n++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      mem[(x % pages) * 512 + (x >> 40) % 512] = x;
    }
  }
}
