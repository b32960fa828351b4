// omp_jacobi READY OUT: an OpenMP (libgomp) Jacobi relaxation on a 512 x 512
// grid with four threads, ITERS sweeps a few ms apart, ready after
// READY_ITER. The grid's final bits are written to OUT as a digest, which
// the driver compares with an uninterrupted run's (each cell depends only on
// the previous sweep, so the result does not depend on thread timing); the
// program also recomputes the sweeps without OpenMP and compares.
#include "e2e.h"

#include <omp.h>

#define N 512
#define ITERS 450
#define READY_ITER 20

static double grid_a[N][N], grid_b[N][N];

static void init(double (*g)[N]) {
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) g[i][j] = (i == 0 || j == 0) ? 100.0 : (double)((i * 7 + j) % 13);
}

static void sweep(double (*src)[N], double (*dst)[N], int parallel) {
#pragma omp parallel for num_threads(4) schedule(static) if (parallel)
  for (int i = 1; i < N - 1; i++)
    for (int j = 1; j < N - 1; j++)
      dst[i][j] = 0.25 * (src[i - 1][j] + src[i + 1][j] + src[i][j - 1] + src[i][j + 1]);
}

static uint64_t digest(double (*g)[N]) {
  uint64_t h = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) {
      uint64_t bits;
      memcpy(&bits, &g[i][j], 8);
      h = e2e_mix(h ^ bits);
    }
  return h;
}

static uint64_t run(int parallel, const char* ready) {
  init(grid_a);
  init(grid_b);
  for (int it = 0; it < ITERS; it++) {
    if (it % 2 == 0)
      sweep(grid_a, grid_b, parallel);
    else
      sweep(grid_b, grid_a, parallel);
    if (ready && it == READY_ITER) e2e_ready(ready);
    if (parallel) e2e_sleep_ms(5);
  }
  return digest(ITERS % 2 ? grid_b : grid_a);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY OUT");
  uint64_t got = run(1, argv[1]);
  if (omp_get_max_threads() < 1) e2e_fail("no OpenMP threads");
  if (e2e_sabotage()) got ^= 1;
  uint64_t want = run(0, NULL);
  if (got != want)
    e2e_fail("OpenMP result %016llx differs from the serial %016llx", (unsigned long long)got,
             (unsigned long long)want);
  FILE* f = fopen(argv[2], "w");
  if (!f) e2e_fail("create %s: %s", argv[2], strerror(errno));
  fprintf(f, "digest %016llx\n", (unsigned long long)got);
  if (fclose(f) != 0) e2e_fail("write %s failed", argv[2]);
  e2e_done();
}
