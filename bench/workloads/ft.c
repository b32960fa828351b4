// An NPB-FT-like workload: a 3-D heat equation solved spectrally. The
// initial field is transformed once by a 3-D FFT; each step multiplies the
// spectrum by exp(-4 alpha pi^2 |k|^2) (rewriting it, as NPB's evolve does)
// and transforms a copy back. A 3-D FFT here is NPB's serial scheme: 1-D
// FFTs along the contiguous axis, then a transpose that makes the next axis
// contiguous, three times, so every step rewrites all three arrays.
//
//   ft CLASS    S 32^3 x 300, W 64^3 x 20, A 128^3 x 20, B 256x256x128 x 20
//
// Self-checking: after the last step, four points of the field are computed
// again by a direct (slow) inverse DFT of the evolved spectrum and must agree
// with the FFT's to 1e-10. Prints NPB's checksum (1024 strided samples) per step.
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npb.h"

typedef double complex cplx;

static int dims[3];  // nx, ny, nz of the current layout: element (a, b, c) at (a*d1 + b)*d2 + c

// In-place radix-2 FFT of each of the `lines` contiguous rows of length n.
static void fft_rows(cplx* a, size_t lines, int n, int dir) {
  int logn = 0;
  while ((1 << logn) < n) logn++;
  cplx* w = malloc(sizeof(cplx) * (n / 2 + 1));
  for (int i = 0; i < n / 2; i++) w[i] = cexp(dir * 2.0 * M_PI * I * i / n);
  for (size_t l = 0; l < lines; l++) {
    cplx* x = a + l * n;
    for (int i = 1, j = 0; i < n; i++) {  // bit reversal
      int bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) {
        cplx t = x[i];
        x[i] = x[j];
        x[j] = t;
      }
    }
    for (int len = 2; len <= n; len <<= 1) {
      int step = n / len;
      for (int i = 0; i < n; i += len)
        for (int k = 0; k < len / 2; k++) {
          cplx u = x[i + k], v = x[i + k + len / 2] * w[k * step];
          x[i + k] = u + v;
          x[i + k + len / 2] = u - v;
        }
    }
  }
  free(w);
}

// out(c, a, b) = in(a, b, c): the last axis becomes the first.
static void rotate(const cplx* in, cplx* out) {
  const int d0 = dims[0], d1 = dims[1], d2 = dims[2];
  for (int a = 0; a < d0; a++)
    for (int b = 0; b < d1; b++) {
      const cplx* row = in + ((size_t)a * d1 + b) * d2;
      for (int c = 0; c < d2; c++) out[((size_t)c * d0 + a) * d1 + b] = row[c];
    }
  dims[0] = d2;
  dims[1] = d0;
  dims[2] = d1;
}

// 3-D FFT of *a (layout nx, ny, nz) using *scratch; the result ends in one
// of the two, and the pointers are swapped so that it is *a.
static void fft3d(cplx** a, cplx** scratch, int dir) {
  size_t total = (size_t)dims[0] * dims[1] * dims[2];
  for (int axis = 0; axis < 3; axis++) {
    fft_rows(*a, total / dims[2], dims[2], dir);
    rotate(*a, *scratch);
    cplx* t = *a;
    *a = *scratch;
    *scratch = t;
  }
  if (dir > 0)
    for (size_t i = 0; i < total; i++) (*a)[i] /= (double)total;
}

// NPB's checksum: 1024 samples at (j, 3j, 5j) modulo the sides.
static cplx checksum(const cplx* u, int nx, int ny, int nz) {
  cplx s = 0;
  for (int j = 1; j <= 1024; j++)
    s += u[((size_t)(j % nx) * ny + (3 * j) % ny) * nz + (5 * j) % nz];
  return s;
}

static int freq(int k, int n) {
  return k < n / 2 ? k : k - n;
}

int main(int argc, char** argv) {
  int used;
  char cls = npb_class_arg(argc, argv, &used);
  static const int cx[] = {32, 64, 128, 256}, cy[] = {32, 64, 128, 256}, cz[] = {32, 64, 128, 128},
                   csteps[] = {300, 20, 20, 20};
  int ci = npb_class_index(cls);
  if (ci < 0 || argc != 1 + used) {
    fprintf(stderr, "usage: ft [--class] S|W|A|B\n");
    return 2;
  }
  const int nx = cx[ci], ny = cy[ci], nz = cz[ci], steps = csteps[ci];
  const size_t total = (size_t)nx * ny * nz;
  const double alpha = 1e-6;
  cplx *u0 = malloc(total * sizeof(cplx)), *u1 = malloc(total * sizeof(cplx)),
       *u2 = malloc(total * sizeof(cplx));
  double* twiddle = malloc(total * sizeof(double));
  if (!u0 || !u1 || !u2 || !twiddle) return 2;
  printf("ft: class %c, grid %dx%dx%d, %d steps (%.0f MiB)\n", cls, nx, ny, nz, steps,
         total * (3 * sizeof(cplx) + sizeof(double)) / 1048576.0);
  unsigned long long seed = 314159265;
  for (size_t i = 0; i < total; i++) {
    double re, im;
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    re = (double)(seed >> 11) / 9007199254740992.0;
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    im = (double)(seed >> 11) / 9007199254740992.0;
    u0[i] = re + I * im;
  }
  for (int x = 0; x < nx; x++)
    for (int y = 0; y < ny; y++)
      for (int z = 0; z < nz; z++) {
        double kx = freq(x, nx), ky = freq(y, ny), kz = freq(z, nz);
        twiddle[((size_t)x * ny + y) * nz + z] =
            exp(-4.0 * alpha * M_PI * M_PI * (kx * kx + ky * ky + kz * kz));
      }
  dims[0] = nx, dims[1] = ny, dims[2] = nz;
  fft3d(&u0, &u1, -1);  // the spectrum of the initial field
  printf("computing\n");
  fflush(stdout);
  cplx sum = 0, last = 0;
  for (int t = 1; t <= steps; t++) {
    for (size_t i = 0; i < total; i++) {
      u0[i] *= twiddle[i];
      u1[i] = u0[i];
    }
    fft3d(&u1, &u2, +1);
    last = checksum(u1, nx, ny, nz);
    sum += last;
    printf("  step %d/%d  checksum %.12e %.12e\n", t, steps, creal(last), cimag(last));
    fflush(stdout);
  }
  // Four points again by a direct inverse DFT of the evolved spectrum u0.
  cplx* wx = malloc(sizeof(cplx) * nx);
  cplx* wy = malloc(sizeof(cplx) * ny);
  cplx* wz = malloc(sizeof(cplx) * nz);
  double worst = 0;
  const int pts[4][3] = {{0, 0, 0}, {1, 2, 3}, {nx / 2, ny / 3, nz - 1}, {nx - 1, ny / 2, 5}};
  for (int p = 0; p < 4; p++) {
    const int X = pts[p][0], Y = pts[p][1], Z = pts[p][2];
    for (int k = 0; k < nx; k++) wx[k] = cexp(2.0 * M_PI * I * (double)((long)k * X % nx) / nx);
    for (int k = 0; k < ny; k++) wy[k] = cexp(2.0 * M_PI * I * (double)((long)k * Y % ny) / ny);
    for (int k = 0; k < nz; k++) wz[k] = cexp(2.0 * M_PI * I * (double)((long)k * Z % nz) / nz);
    cplx direct = 0;
    for (int kx = 0; kx < nx; kx++)
      for (int ky = 0; ky < ny; ky++) {
        cplx wxy = wx[kx] * wy[ky], s = 0;
        const cplx* row = u0 + ((size_t)kx * ny + ky) * nz;
        for (int kz = 0; kz < nz; kz++) s += row[kz] * wz[kz];
        direct += wxy * s;
      }
    direct /= (double)total;
    double err = cabs(direct - u1[((size_t)X * ny + Y) * nz + Z]);
    if (err > worst) worst = err;
  }
  int ok = worst < 1e-10 && isfinite(creal(sum)) && isfinite(cimag(sum));
  if (!ok) printf("FAIL: the FFT and a direct DFT differ by %.3e\n", worst);
  int rc = npb_verified(ok);
  printf("result: checksum %.15e %.15e  sum %.15e %.15e\n", creal(last), cimag(last), creal(sum),
         cimag(sum));
  return rc;
}
