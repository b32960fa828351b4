// An NPB-LU-like workload: symmetric successive over-relaxation (SSOR) on
// a 3-D implicit convection-diffusion system with five unknowns per point
// (interleaved as NPB's u[k][j][i][5]). Each iteration is NPB LU's pair of
// sweeps: a lower-triangular sweep in increasing order (each point needs its
// already-updated west, south and bottom neighbours: a wavefront) and an
// upper-triangular sweep back. Every iteration rewrites the whole solution.
//
//   lu CLASS    S 16^3 x 40, W 40^3 x 50, A 80^3 x 60, B 120^3 x 70
//
// Self-checking: the right-hand side is made from a known smooth solution
// (b = A x*), so the iterate must reach x* to 1e-8 (max norm).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "npb.h"

enum { NV = 5 };
static int n;
static double diag[NV], lo[NV], hi[NV];  // per unknown: centre, upwind and downwind couplings

static size_t at(int i, int j, int k) {
  return (((size_t)i * n + j) * n + k) * NV;
}

static double exact(int i, int j, int k, int v) {
  double x = (i + 1.0) / (n + 1), y = (j + 1.0) / (n + 1), z = (k + 1.0) / (n + 1);
  return sin(M_PI * x * (v + 1)) * (1 + y * y) * cos(z - 0.3 * v);
}

// Sum of the off-diagonal terms for point (i, j, k), unknown v; neighbours
// outside the grid are 0 (Dirichlet).
static double off(const double* u, int i, int j, int k, int v) {
  double s = 0;
  if (i > 0) s += lo[v] * u[at(i - 1, j, k) + v];
  if (j > 0) s += lo[v] * u[at(i, j - 1, k) + v];
  if (k > 0) s += lo[v] * u[at(i, j, k - 1) + v];
  if (i < n - 1) s += hi[v] * u[at(i + 1, j, k) + v];
  if (j < n - 1) s += hi[v] * u[at(i, j + 1, k) + v];
  if (k < n - 1) s += hi[v] * u[at(i, j, k + 1) + v];
  return s;
}

static double relax(double* u, const double* b, int i, int j, int k, double omega) {
  double change = 0;
  for (int v = 0; v < NV; v++) {
    size_t p = at(i, j, k) + v;
    double gs = (b[p] - off(u, i, j, k, v)) / diag[v];
    double d = omega * (gs - u[p]);
    u[p] += d;
    change = fmax(change, fabs(d));
  }
  return change;
}

int main(int argc, char** argv) {
  int used;
  char cls = npb_class_arg(argc, argv, &used);
  static const int cn[] = {16, 40, 80, 120}, citers[] = {40, 50, 60, 70};
  int ci = npb_class_index(cls);
  if (ci < 0 || argc != 1 + used) {
    fprintf(stderr, "usage: lu [--class] S|W|A|B\n");
    return 2;
  }
  n = cn[ci];
  const int iters = citers[ci];
  const double omega = 1.2;
  for (int v = 0; v < NV; v++) {  // diffusion c and convection beta differ per unknown
    double c = 2.0 + 0.5 * v, beta = 0.2 + 0.1 * v;
    diag[v] = 1 + 6 * c;
    lo[v] = -c * (1 + beta);
    hi[v] = -c * (1 - beta);
  }
  size_t len = (size_t)n * n * n * NV;
  double *u = calloc(len, sizeof(double)), *b = malloc(len * sizeof(double));
  if (!u || !b) return 2;
  printf("lu: class %c, grid %d^3 x %d unknowns, %d SSOR iterations (%.0f MiB)\n", cls, n, NV,
         iters, len * 16.0 / 1048576.0);
  // b = A x*, with x* written into u first and u cleared afterwards.
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++)
        for (int v = 0; v < NV; v++) u[at(i, j, k) + v] = exact(i, j, k, v);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++)
        for (int v = 0; v < NV; v++)
          b[at(i, j, k) + v] = diag[v] * u[at(i, j, k) + v] + off(u, i, j, k, v);
  for (size_t p = 0; p < len; p++) u[p] = 0;
  printf("computing\n");
  fflush(stdout);
  double change = 0;
  for (int it = 1; it <= iters; it++) {
    change = 0;
    for (int i = 0; i < n; i++)  // lower sweep
      for (int j = 0; j < n; j++)
        for (int k = 0; k < n; k++) change = fmax(change, relax(u, b, i, j, k, omega));
    for (int i = n - 1; i >= 0; i--)  // upper sweep
      for (int j = n - 1; j >= 0; j--)
        for (int k = n - 1; k >= 0; k--) change = fmax(change, relax(u, b, i, j, k, omega));
    npb_progress(it, iters, "change", change);
  }
  double err = 0, sum = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < n; k++)
        for (int v = 0; v < NV; v++) {
          err = fmax(err, fabs(u[at(i, j, k) + v] - exact(i, j, k, v)));
          sum += u[at(i, j, k) + v];
        }
  int ok = err < 1e-8 && isfinite(sum);
  if (!ok) printf("FAIL: max error %.3e against the known solution\n", err);
  int rc = npb_verified(ok);
  printf("result: error %.6e  last-change %.15e  u-sum %.15e\n", err, change, sum);
  return rc;
}
