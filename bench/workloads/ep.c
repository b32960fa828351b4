// An NPB-EP workload ("embarrassingly parallel"): compute only, almost no
// memory. Generates 2^(M+1) uniform numbers with NPB's linear congruential
// generator (a = 5^13 modulo 2^46, seed 271828183), turns pairs into
// Gaussian deviates by Marsaglia's polar method and sums them and counts
// them by annulus, in batches of 2^16 pairs, exactly as NPB's EP does.
//
//   ep CLASS    S M=24, W M=25, A M=28, B M=30
//
// Self-checking: the sums must match NPB's published verification values
// for the class to a relative 1e-8, and the annulus counts must add up to
// the number of accepted pairs.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "npb.h"

enum { MK = 16, NK = 1 << MK, NQ = 10 };
static const uint64_t MASK46 = (1ull << 46) - 1;

// x = a * x mod 2^46 (2^46 divides 2^64, so the wrapped product is exact).
static uint64_t mulmod46(uint64_t a, uint64_t x) {
  return (a * x) & MASK46;
}

int main(int argc, char** argv) {
  int used;
  char cls = npb_class_arg(argc, argv, &used);
  static const int cm[] = {24, 25, 28, 30};
  // NPB 3.x ep.c's verification values (sx, sy) for classes S, W, A, B.
  static const double ref_sx[] = {-3.247834652034740e+3, -2.863319731645753e+3,
                                  -4.295875165629892e+3, 4.033815542441498e+4};
  static const double ref_sy[] = {-6.958407078382297e+3, -6.320053679109499e+3,
                                  -1.580732573678431e+4, -2.660669192809235e+4};
  int ci = npb_class_index(cls);
  if (ci < 0 || argc != 1 + used) {
    fprintf(stderr, "usage: ep [--class] S|W|A|B\n");
    return 2;
  }
  const int m = cm[ci];
  const long batches = 1l << (m - MK);
  const uint64_t a = 1220703125ull, s = 271828183ull;  // 5^13, NPB's seed
  double* x = malloc(2 * NK * sizeof(double));
  if (!x) return 2;
  printf("ep: class %c, 2^%d pairs in %ld batches\ncomputing\n", cls, m, batches);
  fflush(stdout);
  // an = a^(2^(MK+1)): the multiplier that skips one batch of 2*NK numbers.
  uint64_t an = a;
  for (int i = 0; i < MK + 1; i++) an = mulmod46(an, an);
  double sx = 0, sy = 0, q[NQ] = {0};
  for (long k = 0; k < batches; k++) {
    // Seed of batch k: s * an^k, by binary powering as NPB does.
    uint64_t t1 = s, t2 = an;
    for (long kk = k;; kk /= 2) {
      if (kk & 1) t1 = mulmod46(t2, t1);
      if (kk / 2 == 0) break;
      t2 = mulmod46(t2, t2);
    }
    for (int i = 0; i < 2 * NK; i++) {
      t1 = mulmod46(a, t1);
      x[i] = (double)t1 * 0x1p-46;
    }
    for (int i = 0; i < NK; i++) {
      double x1 = 2.0 * x[2 * i] - 1.0, x2 = 2.0 * x[2 * i + 1] - 1.0, r = x1 * x1 + x2 * x2;
      if (r <= 1.0) {
        double f = sqrt(-2.0 * log(r) / r), g1 = x1 * f, g2 = x2 * f;
        int l = (int)fmax(fabs(g1), fabs(g2));
        q[l] += 1.0;
        sx += g1;
        sy += g2;
      }
    }
    if ((k + 1) % (batches / 16 > 0 ? batches / 16 : 1) == 0) {
      printf("  step %ld/%ld  sx %.12e sy %.12e\n", k + 1, batches, sx, sy);
      fflush(stdout);
    }
  }
  double gc = 0;
  for (int i = 0; i < NQ; i++) gc += q[i];
  // Accepted pairs are pi/4 of all; a count far off means the generator or
  // the sums went wrong, and so do sums off NPB's values.
  double accepted_frac = gc / (double)((uint64_t)1 << m);
  int ok = fabs((sx - ref_sx[ci]) / ref_sx[ci]) <= 1e-8 &&
           fabs((sy - ref_sy[ci]) / ref_sy[ci]) <= 1e-8 && fabs(accepted_frac - M_PI / 4) < 1e-3;
  if (!ok)
    printf("FAIL: sx %.15e sy %.15e, NPB's %.15e %.15e; accepted %.6f\n", sx, sy, ref_sx[ci],
           ref_sy[ci], accepted_frac);
  int rc = npb_verified(ok);
  printf("result: sx %.15e  sy %.15e  pairs %.0f  q0 %.0f q1 %.0f q2 %.0f q3 %.0f\n", sx, sy, gc,
         q[0], q[1], q[2], q[3]);
  return rc;
}
