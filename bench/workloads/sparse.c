// An NPB-CG-like memory pattern: a large sparse matrix (CSR, built once,
// then only read) and small vectors rewritten at every iteration, so about
// 1 % of the memory is written per second. The iteration is Jacobi's on a
// random, strictly diagonally dominant matrix (it converges for any such
// matrix), repeated after convergence as NPB's benchmark repeats CG.
// Deterministic: the printed result is the same on every run.
//
//   sparse [ROWS [NONZEROS_PER_ROW [ITERATIONS]]]
//       defaults 100000, 300, 40: ~342 MiB of matrix, 3 MiB of vectors
//   sparse CLASS   S 4000 x 50 x 30, W 20000 x 100 x 40, A 100000 x 100 x 40,
//                  B 100000 x 300 x 40
//
// Prints "computing" once the matrix is built, then every 10th iteration and
// "result: ... seconds S" (S: the time of the iterations, CLOCK_MONOTONIC,
// frozen time included). Self-checking: exits 1 unless the residual fell
// below 1e-9 of the right-hand side's norm.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "npb.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static unsigned long long seed = 161803398;
static unsigned long long next(void) {
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return seed >> 11;
}

int main(int argc, char** argv) {
  int used;
  char cls = npb_class_arg(argc, argv, &used);
  static const int class_n[] = {4000, 20000, 100000, 100000}, class_per[] = {50, 100, 100, 300},
                   class_it[] = {30, 40, 40, 40};
  int ci = npb_class_index(cls);
  int n = cls ? (ci < 0 ? 0 : class_n[ci]) : argc > 1 ? atoi(argv[1]) : 100000;
  int per_row = cls ? (ci < 0 ? 0 : class_per[ci]) : argc > 2 ? atoi(argv[2]) : 300;
  int iters = cls ? (ci < 0 ? 0 : class_it[ci]) : argc > 3 ? atoi(argv[3]) : 40;
  if (n < 16 || per_row < 2 || per_row > n || iters < 1) {
    fprintf(
        stderr,
        "usage: sparse [ROWS >= 16 [NONZEROS_PER_ROW >= 2 [ITERATIONS >= 1]]] | sparse [--class] "
        "S|W|A|B\n");
    return 2;
  }
  size_t nnz = (size_t)n * (per_row - 1);  // off-diagonal entries
  double* val = malloc(nnz * sizeof(double));
  int32_t* col = malloc(nnz * sizeof(int32_t));
  double *diag = malloc(n * 8.0), *b = malloc(n * 8.0), *x = calloc(n, 8), *y = malloc(n * 8.0);
  if (!val || !col || !diag || !b || !x || !y) return 2;
  // Off-diagonal entries in [-1, 1) scaled so each row's absolute sum is
  // below 0.9 of its diagonal: Jacobi contracts by at least 0.9 per step.
  for (int i = 0; i < n; i++) {
    double* v = val + (size_t)i * (per_row - 1);
    int32_t* c = col + (size_t)i * (per_row - 1);
    for (int e = 0; e < per_row - 1; e++) {
      c[e] = (int32_t)(next() % (unsigned)n);
      if (c[e] == i) c[e] = (i + 1) % n;
      v[e] = (double)next() / 4503599627370496.0 - 1.0;
    }
    diag[i] = 1.0 + (double)(next() % 1000) / 1000.0;
    double scale = 0.9 * diag[i] / (per_row - 1);
    for (int e = 0; e < per_row - 1; e++) v[e] *= scale;
    b[i] = (double)next() / 9007199254740992.0 - 0.5;
  }
  double bn = 0;
  for (int i = 0; i < n; i++) bn += b[i] * b[i];
  bn = sqrt(bn);
  if (cls) printf("sparse: class %c\n", cls);
  printf(
      "sparse: %d rows, %d nonzeros per row (%.0f MiB matrix, %.1f MiB vectors), %d iterations\n"
      "computing\n",
      n, per_row, nnz * 12.0 / (1 << 20), n * 32.0 / (1 << 20), iters);
  fflush(stdout);
  double t0 = now(), res = 0;
  for (int it = 1; it <= iters; it++) {
    // y = D^-1 (b - R x), residual |b - A x| on the way.
    res = 0;
    for (int i = 0; i < n; i++) {
      const double* v = val + (size_t)i * (per_row - 1);
      const int32_t* c = col + (size_t)i * (per_row - 1);
      double s = 0;
      for (int e = 0; e < per_row - 1; e++) s += v[e] * x[c[e]];
      double ri = b[i] - s - diag[i] * x[i];
      res += ri * ri;
      y[i] = (b[i] - s) / diag[i];
    }
    res = sqrt(res);
    double* t = x;
    x = y;
    y = t;
    if (it % 10 == 0) {
      printf("  iteration %4d  residual %.12e\n", it, res);
      fflush(stdout);
    }
  }
  double secs = now() - t0, sum = 0;
  for (int i = 0; i < n; i++) sum += x[i];
  // The program's own costs: a checkpointer that traces it may reap it, so
  // its parent cannot count on wait4's rusage.
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("rusage: minflt %ld user %.3f sys %.3f\n", ru.ru_minflt,
         ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
         ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
  int ok = res < 1e-9 * bn && isfinite(sum);
  if (!ok) printf("FAIL: residual %.3e not below %.3e\n", res, 1e-9 * bn);
  int rc = npb_verified(ok);
  printf("result: residual %.15e  x-sum %.15e  seconds %.3f\n", res, sum, secs);
  return rc;
}
