// rounds READY MIB [huge|nohuge|default]: the workload of
// bench/restored_speed.sh. Three arrays of MIB/3 MiB of doubles, advised as
// asked (MADV_HUGEPAGE, MADV_NOHUGEPAGE, or nothing), filled; writes its PID
// into READY, then runs the same fixed round of work forever (a STREAM-like
// triad over the arrays, then a strided gather that reads one word per page),
// printing "round N ms T" after each. The same process measured before a
// checkpoint and after its restore shows what the restore left it.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static double* array(size_t bytes, const char* advice) {
  // 2 MiB aligned, so that huge pages can back all of it.
  size_t huge = 2u << 20;
  uint8_t* raw =
      mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) exit(1);
  uint8_t* p = (uint8_t*)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
  if (strcmp(advice, "huge") == 0) madvise(p, bytes, MADV_HUGEPAGE);
  if (strcmp(advice, "nohuge") == 0) madvise(p, bytes, MADV_NOHUGEPAGE);
  return (double*)p;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: rounds READY MIB [huge|nohuge|default]\n");
    return 2;
  }
  const size_t n = strtoul(argv[2], NULL, 10) * (1u << 20) / 3 / sizeof(double);
  const char* advice = argc > 3 ? argv[3] : "default";
  if (n < 512) return 2;
  syscall(SYS_close_range, 3u, ~0u, 0u);  // a caller's pipes would tie us to it
  double *a = array(n * sizeof(double), advice), *b = array(n * sizeof(double), advice),
         *c = array(n * sizeof(double), advice);
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = (double)(i % 1000), c[i] = (double)(i % 7);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
  FILE* f = fopen(tmp, "w");
  if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, argv[1]) != 0)
    return 1;
  double sum = 0;
  for (long round = 1;; round++) {
    double t0 = now_ms();
    for (int pass = 0; pass < 4; pass++)
      for (size_t i = 0; i < n; i++) a[i] = b[i] + 0.5 * c[i];
    for (size_t stride = 512, i = 0; i < n; i += stride) sum += a[i] + b[i] + c[i];
    printf("round %ld ms %.2f\n", round, now_ms() - t0);
    fflush(stdout);
  }
  return sum == 42.5;  // keeps the gather from being optimised away
}
