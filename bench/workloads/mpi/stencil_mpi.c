// A stencil MPI workload: Jacobi-style smoothing of a 2-D periodic grid
// (5-point average), rows cut into one band per rank, the halo rows exchanged
// with nonblocking calls (MPI_Irecv/MPI_Isend, then the interior is computed
// while they travel, MPI_Waitall, then the two edge rows).
//
//   stencil_mpi [TOTAL_MIB [ITERATIONS [MIN_MS]]]    default 256 MiB in all, 300 iterations
//
// Self-check at the end: the average keeps the grid's sum (to rounding) and
// every value stays within the initial minimum and maximum (the maximum
// principle); a lost halo, a wrong neighbour or corrupted memory breaks one of
// them. Output: see common.h.
#include <float.h>
#include <math.h>

#include "common.h"

static int width;  // columns (periodic)
static int rows;   // rows of this rank (plus one halo row above and below)

static double initial(uint64_t global_index) {
  uint64_t z = global_index * 0x9e3779b97f4a7c15ull + 12345;
  z = (z ^ (z >> 29)) * 0xbf58476d1ce4e5b9ull;
  z ^= z >> 32;
  return (double)(z >> 11) / 9007199254740992.0;
}

static void row_update(const double* u, double* v, int i) {
  const double* c = u + (size_t)i * width;
  double* o = v + (size_t)i * width;
  for (int j = 0; j < width; j++) {
    int l = j ? j - 1 : width - 1, r = j + 1 < width ? j + 1 : 0;
    o[j] = (c[j] + c[l] + c[r] + c[j - width] + c[j + width]) * 0.2;
  }
}

// Sum, minimum and maximum of the interior of u, over every rank.
static void stats(const double* u, double out[3]) {
  double s = 0, lo = DBL_MAX, hi = -DBL_MAX;
  for (size_t i = (size_t)width; i < (size_t)(rows + 1) * width; i++) {
    s += u[i];
    if (u[i] < lo) lo = u[i];
    if (u[i] > hi) hi = u[i];
  }
  MPI_Allreduce(&s, &out[0], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&lo, &out[1], 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&hi, &out[2], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  Run run = run_start(&argc, &argv, 256, 300);
  size_t points = run.rank_bytes / (2 * sizeof(double));  // two grids
  width = 1024;
  while (width > 8 && points < 4 * (size_t)width) width /= 2;
  rows = (int)(points / width) - 2;  // the halo rows come out of the budget
  if (rows < 2) rows = 2;
  size_t all = (size_t)(rows + 2) * width;
  double* u = run_alloc(all * sizeof(double));
  double* v = run_alloc(all * sizeof(double));
  int above = (run.rank + run.size - 1) % run.size, below = (run.rank + 1) % run.size;
  uint64_t first = (uint64_t)run.rank * rows * width;
  for (size_t i = 0; i < (size_t)rows * width; i++) u[width + i] = initial(first + i);
  double start[3];
  stats(u, start);
  if (run.rank == 0) {
    printf("stencil_mpi: %d ranks, grid %d x %d (periodic), %.0f MiB per rank, %d iterations\n",
           run.size, rows * run.size, width, 2.0 * all * 8 / (1 << 20), run.iters);
    fflush(stdout);
  }
  for (int it = 1; it <= run.iters; it++) {
    MPI_Request req[4];
    double* top = u + width;                    // first interior row
    double* bottom = u + (size_t)rows * width;  // last interior row
    MPI_Irecv(u, width, MPI_DOUBLE, above, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(u + (size_t)(rows + 1) * width, width, MPI_DOUBLE, below, 1, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(bottom, width, MPI_DOUBLE, below, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(top, width, MPI_DOUBLE, above, 1, MPI_COMM_WORLD, &req[3]);
    for (int i = 2; i < rows; i++) row_update(u, v, i);  // needs no halo
    MPI_Status st[4];  // (not MPI_STATUSES_IGNORE: GCC warns wrongly with MPICH's header)
    MPI_Waitall(4, req, st);
    row_update(u, v, 1);
    row_update(u, v, rows);
    double* t = u;
    u = v;
    v = t;
    run_progress(&run, it);
  }

  double end[3];
  stats(u, end);
  char why[200] = "";
  if (!(fabs(end[0] - start[0]) <= 1e-9 * fabs(start[0])))
    snprintf(why, sizeof why, "sum %.17g is not the initial %.17g", end[0], start[0]);
  else if (!(end[1] >= start[1] && end[2] <= start[2]))
    snprintf(why, sizeof why, "values [%.17g, %.17g] left the initial range [%.17g, %.17g]", end[1],
             end[2], start[1], start[2]);
  uint64_t h = run_hash(RUN_HASH_SEED, u + width, (size_t)rows * width * sizeof(double));
  char detail[96];
  snprintf(detail, sizeof detail, "sum %.17g", end[0]);
  return run_finish(&run, "stencil", h, detail, why);
}
