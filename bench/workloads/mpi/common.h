// What the three MPI workloads share: arguments, progress lines, the final
// checksum. Header-only (static functions) so each workload is one program.
//
// Every workload takes   PROGRAM [TOTAL_MIB [ITERATIONS [MIN_MS [PACE_FILE]]]]
// TOTAL_MIB is the memory of the whole job (split evenly over the ranks);
// MIN_MS (default 0) makes every iteration last at least that long (each rank
// sleeps the rest), so a test has time to checkpoint the job while it computes
// however fast the machine is; the results do not depend on it. With
// PACE_FILE, only while that file exists: a test removes it once it has its
// checkpoints, and the restored job runs the rest at full speed; the job
// waits before its last line while the file exists.
// rank 0 prints "iter N" (flushed) every few iterations and, at the end,
// "result: <name> ranks R mib M iters I checksum 0x<16 hex> <detail>" and
// "check: ok" or "check: FAILED <why>". The checksum hashes the final arrays of
// every rank (in rank order), so an uninterrupted run and a restored one print
// the same line only if they computed exactly the same thing. Exit status 0
// only when the self-check passed (every rank's).
#ifndef LIBCKPT_MPI_WORKLOAD_COMMON_H
#define LIBCKPT_MPI_WORKLOAD_COMMON_H

#include <inttypes.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  int rank, size;
  long total_mib;  // of the whole job
  int iters;
  size_t rank_bytes;  // this rank's share of total_mib
  int progress_every;
  long min_ms;            // minimum duration of an iteration
  const char* pace_file;  // min_ms applies while it exists (NULL: always)
  struct timespec mark;   // when the current iteration started
} Run;

static Run run_start(int* argc, char*** argv, long default_mib, int default_iters) {
  Run r;
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &r.size);
  r.total_mib = *argc > 1 ? atol((*argv)[1]) : default_mib;
  r.iters = *argc > 2 ? atoi((*argv)[2]) : default_iters;
  r.min_ms = *argc > 3 ? atol((*argv)[3]) : 0;
  r.pace_file = *argc > 4 ? (*argv)[4] : NULL;
  if (r.total_mib < 1 || r.iters < 1 || r.min_ms < 0) {
    if (r.rank == 0)
      fprintf(stderr, "usage: %s [TOTAL_MIB >= 1 [ITERATIONS >= 1 [MIN_MS >= 0 [PACE_FILE]]]]\n",
              (*argv)[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  r.rank_bytes = (size_t)r.total_mib * (1u << 20) / (size_t)r.size;
  r.progress_every = r.iters >= 50 ? r.iters / 50 : 1;
  clock_gettime(CLOCK_MONOTONIC, &r.mark);
  return r;
}

// Allocates and touches (first-touch pages, all of them really present).
static void* run_alloc(size_t bytes) {
  void* p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  memset(p, 0, bytes);
  return p;
}

// Ends iteration `it`: the progress line, then the rest of min_ms asleep.
static void run_progress(Run* r, int it) {
  if (r->rank == 0 && (it % r->progress_every == 0 || it == r->iters)) {
    printf("iter %d\n", it);
    fflush(stdout);
  }
  if (r->min_ms > 0 && (!r->pace_file || access(r->pace_file, F_OK) == 0)) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long spent =
        (now.tv_sec - r->mark.tv_sec) * 1000000000ll + (now.tv_nsec - r->mark.tv_nsec);
    long long rest = r->min_ms * 1000000ll - spent;
    // A restore can make the clock jump: never sleep longer than min_ms.
    if (rest > r->min_ms * 1000000ll) rest = r->min_ms * 1000000ll;
    if (rest > 0) {
      struct timespec d = {(time_t)(rest / 1000000000ll), (long)(rest % 1000000000ll)};
      while (nanosleep(&d, &d) != 0) {
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &r->mark);
  }
  // Paced, the job does not end while the test still works on it: however
  // slow the machine, it is checkpointed and killed before its last line.
  if (it == r->iters && r->pace_file) {
    struct timespec d = {0, 50 * 1000000l};
    while (access(r->pace_file, F_OK) == 0) nanosleep(&d, NULL);
  }
}

// FNV-1a, 64-bit, over bytes, continuing from h (start with RUN_HASH_SEED).
#define RUN_HASH_SEED 0xcbf29ce484222325ull
static uint64_t run_hash(uint64_t h, const void* data, size_t len) {
  const unsigned char* p = data;
  // Eight bytes at a time (a word-wise FNV variant): the hash is only compared
  // between runs of this same program, it need not be the textbook one.
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Ends the run: combines every rank's hash in rank order, prints the result
// line and the check line on rank 0, and returns the exit status (0 only if
// every rank's self-check passed). `why` is this rank's failure ("" if none).
static int run_finish(const Run* r, const char* name, uint64_t local_hash, const char* detail,
                      const char* why) {
  uint64_t* hashes = r->rank == 0 ? malloc(sizeof(uint64_t) * (size_t)r->size) : NULL;
  MPI_Gather(&local_hash, 1, MPI_UINT64_T, hashes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  int ok = why[0] == '\0', all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!ok) fprintf(stderr, "rank %d: check failed: %s\n", r->rank, why);
  if (r->rank == 0) {
    uint64_t h = RUN_HASH_SEED;
    for (int i = 0; i < r->size; i++) h = run_hash(h, &hashes[i], sizeof hashes[i]);
    printf("result: %s ranks %d mib %ld iters %d checksum 0x%016" PRIx64 " %s\n", name, r->size,
           r->total_mib, r->iters, h, detail);
    printf(all_ok ? "check: ok\n" : "check: FAILED (see stderr)\n");
    fflush(stdout);
    free(hashes);
  }
  MPI_Finalize();
  return all_ok ? 0 : 1;
}

#endif
