// An NPB-SP-like workload: alternating-direction implicit (ADI) steps of a
// 3-D diffusion problem with five independent fields. Each step solves a
// tridiagonal system (Thomas algorithm) along every grid line in x, then y,
// then z, as NPB SP's x_solve/y_solve/z_solve do; the x and y lines are
// strided, so each is gathered, solved and scattered back. Every step
// rewrites all five fields.
//
//   sp CLASS    S 16^3 x 20, W 48^3 x 30, A 96^3 x 40, B 160^3 x 40
//
// Self-checking: each field starts as a sum of two discrete eigenmodes
// sin(pi m x) of the Dirichlet Laplacian, which the implicit solves only
// scale, by a factor known in closed form; after the last step every point
// must match that exact solution to 1e-9 (relative to the largest value).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "npb.h"

enum { NV = 5 };
static int n;

static size_t at(int i, int j, int k) {
  return ((size_t)i * n + j) * n + k;
}

static double mode(int m, int i) {
  return sin(M_PI * m * (i + 1.0) / (n + 1));
}

// Scaling of mode m by one solve of (I + r T), T = tridiag(-1, 2, -1).
static double gain(int m, double r) {
  double s = sin(M_PI * m / (2.0 * (n + 1)));
  return 1.0 / (1.0 + 4.0 * r * s * s);
}

static const int modes[2][3] = {{1, 1, 1}, {2, 3, 1}};
static const double amp[2] = {1.0, 0.5};

static double exact(int i, int j, int k, double r, int steps) {
  double u = 0;
  for (int q = 0; q < 2; q++) {
    const int* m = modes[q];
    double g = pow(gain(m[0], r) * gain(m[1], r) * gain(m[2], r), steps);
    u += amp[q] * g * mode(m[0], i) * mode(m[1], j) * mode(m[2], k);
  }
  return u;
}

// Solves (I + r T) y = x in place on line[0..n) (Thomas; c: scratch).
static void thomas(double* line, double* c, double r) {
  const double a = -r, b = 1 + 2 * r;
  c[0] = a / b;
  line[0] /= b;
  for (int i = 1; i < n; i++) {
    double m = b - a * c[i - 1];
    c[i] = a / m;
    line[i] = (line[i] - a * line[i - 1]) / m;
  }
  for (int i = n - 2; i >= 0; i--) line[i] -= c[i] * line[i + 1];
}

// One implicit solve along axis (0: i, 1: j, 2: k) for every line.
static void solve_axis(double* u, int axis, double r, double* line, double* c) {
  const size_t stride = axis == 0 ? (size_t)n * n : axis == 1 ? (size_t)n : 1;
  for (int p = 0; p < n; p++)
    for (int q = 0; q < n; q++) {
      size_t base = axis == 0 ? at(0, p, q) : axis == 1 ? at(p, 0, q) : at(p, q, 0);
      for (int t = 0; t < n; t++) line[t] = u[base + t * stride];
      thomas(line, c, r);
      for (int t = 0; t < n; t++) u[base + t * stride] = line[t];
    }
}

int main(int argc, char** argv) {
  int used;
  char cls = npb_class_arg(argc, argv, &used);
  static const int cn[] = {16, 48, 96, 160}, csteps[] = {20, 30, 40, 40};
  int ci = npb_class_index(cls);
  if (ci < 0 || argc != 1 + used) {
    fprintf(stderr, "usage: sp [--class] S|W|A|B\n");
    return 2;
  }
  n = cn[ci];
  const int steps = csteps[ci];
  const size_t len = (size_t)n * n * n;
  double* u[NV];
  double r[NV];
  for (int v = 0; v < NV; v++) {
    r[v] = 0.5 + 0.5 * v;
    u[v] = malloc(len * sizeof(double));
    if (!u[v]) return 2;
  }
  double *line = malloc(n * sizeof(double)), *c = malloc(n * sizeof(double));
  if (!line || !c) return 2;
  printf("sp: class %c, grid %d^3 x %d fields, %d ADI steps (%.0f MiB)\n", cls, n, NV, steps,
         len * NV * 8.0 / 1048576.0);
  for (int v = 0; v < NV; v++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        for (int k = 0; k < n; k++) u[v][at(i, j, k)] = exact(i, j, k, r[v], 0);
  printf("computing\n");
  fflush(stdout);
  for (int s = 1; s <= steps; s++) {
    for (int v = 0; v < NV; v++)
      for (int axis = 0; axis < 3; axis++) solve_axis(u[v], axis, r[v], line, c);
    npb_progress(s, steps, "u0-centre", u[0][at(n / 2, n / 2, n / 2)]);
  }
  double err = 0, big = 0, sum = 0;
  for (int v = 0; v < NV; v++)
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        for (int k = 0; k < n; k++) {
          double e = exact(i, j, k, r[v], steps);
          err = fmax(err, fabs(u[v][at(i, j, k)] - e));
          big = fmax(big, fabs(e));
          sum += u[v][at(i, j, k)];
        }
  int ok = big > 0 && err <= 1e-9 * big && isfinite(sum);
  if (!ok)
    printf("FAIL: max error %.3e against the exact solution (largest value %.3e)\n", err, big);
  int rc = npb_verified(ok);
  printf("result: relative-error %.3e  u-sum %.15e\n", err / big, sum);
  return rc;
}
