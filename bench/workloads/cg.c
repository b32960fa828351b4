// An NPB-CG-like workload: conjugate gradient on a 3-D Poisson problem
// (7-point stencil, matrix-free). Deterministic: the printed result is the
// same on every run, so a restored run can be compared with an uninterrupted one.
//
//   cg [N [ITERATIONS]]    grid N^3 (default 128), iterations (default 200)
//   cg CLASS               S 32^3 x 1500, W 64^3 x 50, A 128^3 x 100, B 192^3 x 200
//
// Self-checking: at the end it recomputes b - A x from scratch (b regenerated)
// and needs it to agree with the residual the iteration carried and to be
// below |b| / 10; a corrupted x, r or p breaks one or the other.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "npb.h"

static int n;

static size_t idx(int i, int j, int k) {
  return ((size_t)i * n + j) * n + k;
}

// y = A x for the Dirichlet Laplacian (plus a small shift to keep A well conditioned).
static void apply(const double* x, double* y) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++) {
        double s = 6.05 * x[idx(i, j, k)];
        if (i > 0) s -= x[idx(i - 1, j, k)];
        if (i < n - 1) s -= x[idx(i + 1, j, k)];
        if (j > 0) s -= x[idx(i, j - 1, k)];
        if (j < n - 1) s -= x[idx(i, j + 1, k)];
        if (k > 0) s -= x[idx(i, j, k - 1)];
        if (k < n - 1) s -= x[idx(i, j, k + 1)];
        y[idx(i, j, k)] = s;
      }
}

static double dot(const double* a, const double* b, size_t len) {
  double s = 0;
  for (size_t i = 0; i < len; i++) s += a[i] * b[i];
  return s;
}

static double rhs(unsigned long long* seed) {
  *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*seed >> 11) / 9007199254740992.0 - 0.5;
}

int main(int argc, char** argv) {
  int used;
  char cls = npb_class_arg(argc, argv, &used);
  static const int class_n[] = {32, 64, 128, 192}, class_it[] = {1500, 50, 100, 200};
  if (cls == '?') {
    fprintf(stderr, "usage: cg [N [ITERATIONS]] | cg [--class] S|W|A|B\n");
    return 2;
  }
  n = cls ? class_n[npb_class_index(cls)] : argc > 1 ? atoi(argv[1]) : 128;
  int iters = cls ? class_it[npb_class_index(cls)] : argc > 2 ? atoi(argv[2]) : 200;
  if (n < 2 || iters < 1) {
    fprintf(stderr, "usage: cg [N >= 2 [ITERATIONS >= 1]] | cg [--class] S|W|A|B\n");
    return 2;
  }
  size_t len = (size_t)n * n * n;
  double *x = calloc(len, 8), *r = malloc(len * 8), *p = malloc(len * 8), *q = malloc(len * 8);
  if (!x || !r || !p || !q) return 2;
  // b: a deterministic pseudo-random right-hand side (LCG).
  unsigned long long seed = 314159265;
  for (size_t i = 0; i < len; i++) {
    r[i] = rhs(&seed);
    p[i] = r[i];
  }
  double rho = dot(r, r, len), bnorm = sqrt(rho);
  if (cls) printf("cg: class %c\n", cls);
  printf("cg: grid %d^3 (%.0f MiB), %d iterations, |b| = %.6e\n", n, len * 32.0 / (1 << 20), iters,
         sqrt(rho));
  fflush(stdout);
  for (int it = 1; it <= iters; it++) {
    apply(p, q);
    double alpha = rho / dot(p, q, len);
    for (size_t i = 0; i < len; i++) {
      x[i] += alpha * p[i];
      r[i] -= alpha * q[i];
    }
    double rho_new = dot(r, r, len);
    double beta = rho_new / rho;
    rho = rho_new;
    for (size_t i = 0; i < len; i++) p[i] = r[i] + beta * p[i];
    if (it % 25 == 0) {
      printf("  iteration %4d  residual %.12e\n", it, sqrt(rho));
      fflush(stdout);
    }
  }
  // The true residual |b - A x|, b regenerated from its seed.
  apply(x, q);
  seed = 314159265;
  double true_res = 0;
  for (size_t i = 0; i < len; i++) {
    double d = rhs(&seed) - q[i];
    true_res += d * d;
  }
  true_res = sqrt(true_res);
  double carried = sqrt(rho);
  int ok = fabs(true_res - carried) <= 1e-6 * bnorm && true_res < bnorm / 10;
  if (!ok) printf("FAIL: true residual %.6e, carried %.6e, |b| %.6e\n", true_res, carried, bnorm);
  int rc = npb_verified(ok);
  printf("result: residual %.15e  x-checksum %.15e\n", carried, dot(x, x, len));
  return rc;
}
