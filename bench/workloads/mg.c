// An NPB-MG-like workload: multigrid V-cycles for a 3-D Poisson problem
// (7-point stencil, red-black Gauss-Seidel smoothing, full-weighting-ish
// restriction, piecewise-constant prolongation). Its memory pattern is MG's:
// each V-cycle rewrites the solution and residual of every level, about two
// thirds of what it holds, several times per second. Deterministic: the
// printed result is the same on every run, so a restored or checkpointed run
// can be compared with an uninterrupted one.
//
//   mg [N [CYCLES]]    finest grid N^3 (default 256: ~440 MiB), V-cycles (default 12)
//   mg CLASS           S 32^3 x 4, W 64^3 x 8, A 128^3 x 40, B 256^3 x 20
//
// Prints "computing" once its memory is set up, then one line per cycle and
// "result: ... seconds S" (S: the time of the cycles, CLOCK_MONOTONIC, frozen
// time included). Self-checking: exits 1 unless the residual fell by the
// factor multigrid must reach.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "npb.h"

typedef struct {
  int n;      // points per side, boundaries included
  double h2;  // squared mesh width (finest: 1)
  double *u, *f, *r;
} Level;

static size_t at(int n, int i, int j, int k) {
  return ((size_t)i * n + j) * n + k;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Red-black Gauss-Seidel: (6u - sum of neighbours) / h2 = f; rewrites u.
static void smooth(Level* L) {
  const int n = L->n;
  for (int color = 0; color < 2; color++)
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++) {
        int k0 = 1 + ((i + j + color) & 1);
        double* u = L->u + at(n, i, j, 0);
        const double* f = L->f + at(n, i, j, 0);
        for (int k = k0; k < n - 1; k += 2)
          u[k] = (u[k - 1] + u[k + 1] + u[k - n] + u[k + n] + u[k - (size_t)n * n] +
                  u[k + (size_t)n * n] + L->h2 * f[k]) /
                 6.0;
      }
}

// r = f - A u; returns |r|^2.
static double residual(Level* L) {
  const int n = L->n;
  double s = 0;
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++) {
      const double* u = L->u + at(n, i, j, 0);
      const double* f = L->f + at(n, i, j, 0);
      double* r = L->r + at(n, i, j, 0);
      for (int k = 1; k < n - 1; k++) {
        double au = (6.0 * u[k] - u[k - 1] - u[k + 1] - u[k - n] - u[k + n] - u[k - (size_t)n * n] -
                     u[k + (size_t)n * n]) /
                    L->h2;
        r[k] = f[k] - au;
        s += r[k] * r[k];
      }
    }
  return s;
}

// Coarse f = mean of the 8 fine residuals under it; coarse u = 0.
static void restrict_to(const Level* fine, Level* c) {
  const int nf = fine->n, nc = c->n;
  for (int i = 1; i < nc - 1; i++)
    for (int j = 1; j < nc - 1; j++)
      for (int k = 1; k < nc - 1; k++) {
        double s = 0;
        for (int d = 0; d < 8; d++)
          s += fine->r[at(nf, 2 * i - 1 + (d >> 2), 2 * j - 1 + ((d >> 1) & 1),
                          2 * k - 1 + (d & 1))];
        c->f[at(nc, i, j, k)] = s / 8.0;
        c->u[at(nc, i, j, k)] = 0;
      }
}

// Fine u += coarse u, constant over each 2x2x2 block, damped by 2/3: with
// this piecewise-constant prolongation the full coarse correction overshoots
// the smooth error, and the V-cycle diverged slowly (1.7 % per cycle at class
// A, 16-30 % at B, whose self-check then failed); damped, it converges at
// every class (about 0.9 per cycle).
static void prolong_add(Level* fine, const Level* c) {
  const double damping = 2.0 / 3.0;
  const int nf = fine->n, nc = c->n;
  for (int i = 1; i < nf - 1; i++)
    for (int j = 1; j < nf - 1; j++) {
      double* u = fine->u + at(nf, i, j, 0);
      const double* cu = c->u + at(nc, (i + 1) / 2, (j + 1) / 2, 0);
      for (int k = 1; k < nf - 1; k++) u[k] += damping * cu[(k + 1) / 2];
    }
}

static void vcycle(Level* lv, int l, int levels) {
  if (l == levels - 1) {
    for (int s = 0; s < 8; s++) smooth(&lv[l]);
    return;
  }
  smooth(&lv[l]);
  smooth(&lv[l]);
  residual(&lv[l]);
  restrict_to(&lv[l], &lv[l + 1]);
  vcycle(lv, l + 1, levels);
  prolong_add(&lv[l], &lv[l + 1]);
  smooth(&lv[l]);
  smooth(&lv[l]);
}

int main(int argc, char** argv) {
  int used;
  char cls = npb_class_arg(argc, argv, &used);
  static const int class_n[] = {32, 64, 128, 256}, class_cycles[] = {4, 8, 40, 20};
  int n = cls ? (cls == '?' ? 0 : class_n[npb_class_index(cls)]) : argc > 1 ? atoi(argv[1]) : 256;
  int cycles = cls        ? (cls == '?' ? 0 : class_cycles[npb_class_index(cls)])
               : argc > 2 ? atoi(argv[2])
                          : 12;
  if (n < 8 || (n & (n - 1)) || cycles < 1) {
    fprintf(stderr, "usage: mg [N (a power of two >= 8) [CYCLES >= 1]] | mg [--class] S|W|A|B\n");
    return 2;
  }
  Level lv[16];
  int levels = 0;
  double bytes = 0;
  for (int m = n; m >= 4 && levels < 16; m /= 2, levels++) {
    size_t len = (size_t)m * m * m;
    lv[levels].n = m;
    lv[levels].h2 = (double)(1 << levels) * (1 << levels);
    lv[levels].u = calloc(len, 8);
    lv[levels].f = calloc(len, 8);
    lv[levels].r = calloc(len, 8);
    if (!lv[levels].u || !lv[levels].f || !lv[levels].r) return 2;
    bytes += 3.0 * len * 8;
  }
  // f: a deterministic pseudo-random right-hand side (LCG); r touched so all
  // of the memory is populated before the cycles start, as in NPB.
  unsigned long long seed = 271828183;
  for (int i = 1; i < n - 1; i++)
    for (int j = 1; j < n - 1; j++)
      for (int k = 1; k < n - 1; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        lv[0].f[at(n, i, j, k)] = (double)(seed >> 11) / 9007199254740992.0 - 0.5;
      }
  for (int l = 0; l < levels; l++) {
    size_t len = (size_t)lv[l].n * lv[l].n * lv[l].n;
    for (size_t x = 0; x < len; x += 512) lv[l].r[x] = 0, lv[l].u[x] = 0, lv[l].f[x] += 0;
  }
  double r0 = sqrt(residual(&lv[0]));
  if (cls) printf("mg: class %c\n", cls);
  printf("mg: grid %d^3, %d levels (%.0f MiB), %d V-cycles, |r0| = %.6e\ncomputing\n", n, levels,
         bytes / (1 << 20), cycles, r0);
  fflush(stdout);
  double t0 = now(), rn = r0;
  for (int c = 1; c <= cycles; c++) {
    vcycle(lv, 0, levels);
    rn = sqrt(residual(&lv[0]));
    printf("  cycle %3d  residual %.12e\n", c, rn);
    fflush(stdout);
  }
  double secs = now() - t0, sum = 0;
  for (size_t x = 0; x < (size_t)n * n * n; x++) sum += lv[0].u[x];
  // The program's own costs: a checkpointer that traces it may reap it, so
  // its parent cannot count on wait4's rusage.
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("rusage: minflt %ld user %.3f sys %.3f\n", ru.ru_minflt,
         ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
         ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
  // Multigrid reduces the residual by a roughly constant factor per cycle:
  // anything less than 10x over the run means the computation went wrong.
  int ok = rn < r0 / 10 && isfinite(sum);
  if (!ok) printf("FAIL: residual %.3e did not fall below %.3e\n", rn, r0 / 10);
  int rc = npb_verified(ok);
  printf("result: residual %.15e  u-sum %.15e  seconds %.3f\n", rn, sum, secs);
  return rc;
}
