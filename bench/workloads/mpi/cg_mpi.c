// A CG-like MPI solver: conjugate gradient on a 3-D Poisson problem (7-point
// stencil plus a small shift, matrix-free), the grid cut into slabs along z,
// one slab per rank. Each iteration: a halo exchange of one plane with each
// neighbour (MPI_Sendrecv, point-to-point) and two MPI_Allreduce (dot products).
//
//   cg_mpi [TOTAL_MIB [ITERATIONS [MIN_MS]]]    default 256 MiB in all, 400 iterations
//
// Self-check at the end: the right-hand side b still equals what it was made
// from (a hash of each point's global index), the residual fell, and the true
// residual |b - A x| agrees with the one CG carried along (a wrong halo, a lost
// update or corrupted memory breaks that). Output: see common.h.
#include <math.h>

#include "common.h"

static int nx;        // points per side in x and y (the plane is nx * nx)
static int nzl;       // planes of this rank
static size_t pl;     // points per plane
static int up, down;  // neighbour ranks (MPI_PROC_NULL at the ends)

static double rhs(uint64_t global_index) {
  // splitmix64: b does not depend on how the grid is cut.
  uint64_t z = global_index + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0 - 0.5;
}

// Fills the halo planes of v (v has one plane below and one above its nzl planes).
static void halo(double* v) {
  MPI_Sendrecv(v + pl, (int)pl, MPI_DOUBLE, down, 0, v + (size_t)(nzl + 1) * pl, (int)pl,
               MPI_DOUBLE, up, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Sendrecv(v + (size_t)nzl * pl, (int)pl, MPI_DOUBLE, up, 1, v, (int)pl, MPI_DOUBLE, down, 1,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

// y = A v for v with halos (the global boundary is Dirichlet: halos of the
// end ranks stay zero).
static void apply(const double* v, double* y) {
  for (int k = 0; k < nzl; k++)
    for (int j = 0; j < nx; j++)
      for (int i = 0; i < nx; i++) {
        const double* c = v + (size_t)(k + 1) * pl + (size_t)j * nx + i;
        double s = 6.05 * c[0] - c[-(ptrdiff_t)pl] - c[pl];
        if (i > 0) s -= c[-1];
        if (i < nx - 1) s -= c[1];
        if (j > 0) s -= c[-nx];
        if (j < nx - 1) s -= c[nx];
        y[(size_t)k * pl + (size_t)j * nx + i] = s;
      }
}

static double dot(const double* a, const double* b, size_t n) {
  double s = 0, all = 0;
  for (size_t i = 0; i < n; i++) s += a[i] * b[i];
  MPI_Allreduce(&s, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

int main(int argc, char** argv) {
  Run run = run_start(&argc, &argv, 256, 400);
  // Five vectors (x, r, p with halos, q, b).
  size_t points = run.rank_bytes / (5 * sizeof(double));
  nx = 128;
  while (nx > 4 && points < 2 * (size_t)nx * nx) nx /= 2;
  pl = (size_t)nx * nx;
  nzl = (int)(points / pl);
  if (nzl < 1) nzl = 1;
  size_t n = (size_t)nzl * pl;
  up = run.rank + 1 < run.size ? run.rank + 1 : MPI_PROC_NULL;
  down = run.rank > 0 ? run.rank - 1 : MPI_PROC_NULL;

  double* x = run_alloc(n * sizeof(double));
  double* r = run_alloc(n * sizeof(double));
  double* q = run_alloc(n * sizeof(double));
  double* b = run_alloc(n * sizeof(double));
  double* pv = run_alloc((n + 2 * pl) * sizeof(double));
  double* p = pv + pl;                      // interior of p
  uint64_t first = (uint64_t)run.rank * n;  // global index of this rank's first point
  for (size_t i = 0; i < n; i++) {
    b[i] = rhs(first + i);
    r[i] = b[i];
    p[i] = b[i];
  }
  double rho = dot(r, r, n), norm_b = sqrt(rho);
  if (run.rank == 0) {
    printf("cg_mpi: %d ranks, grid %d x %d x %d, %.0f MiB per rank, %d iterations\n", run.size, nx,
           nx, nzl * run.size, (5 * n + 2 * pl) * 8.0 / (1 << 20), run.iters);
    fflush(stdout);
  }
  for (int it = 1; it <= run.iters; it++) {
    halo(pv);
    apply(pv, q);
    double alpha = rho / dot(p, q, n);
    for (size_t i = 0; i < n; i++) {
      x[i] += alpha * p[i];
      r[i] -= alpha * q[i];
    }
    double rho_new = dot(r, r, n);
    double beta = rho_new / rho;
    rho = rho_new;
    for (size_t i = 0; i < n; i++) p[i] = r[i] + beta * p[i];
    run_progress(&run, it);
  }

  // Self-check.
  char why[160] = "";
  for (size_t i = 0; i < n; i++)
    if (b[i] != rhs(first + i)) {
      snprintf(why, sizeof why, "b[%zu] changed", i);
      break;
    }
  memcpy(p, x, n * sizeof(double));
  halo(pv);
  apply(pv, q);  // q = A x
  for (size_t i = 0; i < n; i++) q[i] = b[i] - q[i];
  double true_res = sqrt(dot(q, q, n)), res = sqrt(rho);
  if (!why[0] && !(res < 0.5 * norm_b))
    snprintf(why, sizeof why, "residual %.3e did not fall below half of |b| %.3e", res, norm_b);
  if (!why[0] && !(fabs(true_res - res) <= 1e-8 * norm_b))
    snprintf(why, sizeof why, "true residual %.17g differs from CG's %.17g", true_res, res);

  uint64_t h = run_hash(RUN_HASH_SEED, x, n * sizeof(double));
  h = run_hash(h, r, n * sizeof(double));
  char detail[96];
  snprintf(detail, sizeof detail, "residual %.17g", res);
  return run_finish(&run, "cg", h, detail, why);
}
