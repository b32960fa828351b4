// An FT-like MPI workload: a square matrix of 64-bit integers, one band of
// rows per rank, transposed every iteration with MPI_Alltoall (the exchange
// at the heart of a distributed 3-D FFT), after an elementwise update
// a <- a * M + t (mod 2^64, M odd, t the iteration).
//
//   transpose_mpi [TOTAL_MIB [ITERATIONS [MIN_MS]]]    default 256 MiB in all, 200 iterations
//
// Self-check at the end, exact for every element: after T iterations the
// element at (i, j) must be M^T * a0 + C_T, where a0 is the initial value of
// (i, j) (T even) or of (j, i) (T odd) and C_T = M * C_(T-1) + T. A block sent
// to the wrong rank or placed wrongly, or any corrupted word, is found.
// Output: see common.h.
#include "common.h"

#define MUL 0x5851f42d4c957f2dull  // odd

static uint64_t initial(uint64_t row, uint64_t col) {
  uint64_t z = (row << 32 | col) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int main(int argc, char** argv) {
  Run run = run_start(&argc, &argv, 256, 200);
  const int P = run.size;
  // Three arrays of (N / P) x N words per rank: the band, send and receive buffers.
  size_t words = run.rank_bytes / (3 * sizeof(uint64_t));
  size_t n = 1;
  while ((n + 1) * (n + 1) / P <= words) n++;
  n -= n % P;
  if (n < (size_t)P) n = P;
  const size_t nb = n / P;  // rows per rank, and the side of one block
  uint64_t* a = run_alloc(nb * n * sizeof(uint64_t));
  uint64_t* send = run_alloc(nb * n * sizeof(uint64_t));
  uint64_t* recv = run_alloc(nb * n * sizeof(uint64_t));
  const size_t row0 = (size_t)run.rank * nb;  // global index of this rank's first row
  for (size_t r = 0; r < nb; r++)
    for (size_t c = 0; c < n; c++) a[r * n + c] = initial(row0 + r, c);
  if (run.rank == 0) {
    printf("transpose_mpi: %d ranks, matrix %zu x %zu, %.0f MiB per rank, %d iterations\n", P, n, n,
           3.0 * nb * n * 8 / (1 << 20), run.iters);
    fflush(stdout);
  }
  for (int it = 1; it <= run.iters; it++) {
    // Update and pack: block q holds columns q*nb .. q*nb+nb-1 of every local row.
    for (int q = 0; q < P; q++)
      for (size_t r = 0; r < nb; r++) {
        uint64_t* src = a + r * n + (size_t)q * nb;
        uint64_t* dst = send + ((size_t)q * nb + r) * nb;
        for (size_t c = 0; c < nb; c++) dst[c] = src[c] * MUL + (uint64_t)it;
      }
    MPI_Alltoall(send, (int)(nb * nb), MPI_UINT64_T, recv, (int)(nb * nb), MPI_UINT64_T,
                 MPI_COMM_WORLD);
    // recv block q = rows q*nb.. of the old matrix, columns of this rank's new
    // rows: old (q*nb + x, rank*nb + y) becomes new local row y, column q*nb + x.
    for (int q = 0; q < P; q++)
      for (size_t x = 0; x < nb; x++) {
        const uint64_t* src = recv + ((size_t)q * nb + x) * nb;
        for (size_t y = 0; y < nb; y++) a[y * n + (size_t)q * nb + x] = src[y];
      }
    run_progress(&run, it);
  }

  uint64_t mul_t = 1, c_t = 0;
  for (int t = 1; t <= run.iters; t++) {
    mul_t *= MUL;
    c_t = c_t * MUL + (uint64_t)t;
  }
  char why[160] = "";
  for (size_t r = 0; r < nb && !why[0]; r++)
    for (size_t c = 0; c < n; c++) {
      size_t i = row0 + r;
      uint64_t a0 = run.iters % 2 ? initial(c, i) : initial(i, c);
      if (a[r * n + c] != mul_t * a0 + c_t) {
        snprintf(why, sizeof why, "element (%zu, %zu) is 0x%016" PRIx64 ", not 0x%016" PRIx64, i, c,
                 a[r * n + c], mul_t * a0 + c_t);
        break;
      }
    }
  uint64_t h = run_hash(RUN_HASH_SEED, a, nb * n * sizeof(uint64_t));
  char detail[64];
  snprintf(detail, sizeof detail, "n %zu", n);
  return run_finish(&run, "transpose", h, detail, why);
}
