#!/usr/bin/env bash
# An OpenMP program (gcc -fopenmp, libgomp's default thread count): a
# Jacobi relaxation on a 2048x2048 grid, parallel for over its rows,
# checkpointed while the threads compute, killed, restored: the digest of
# the final grid (summed in one fixed order) must be an uninterrupted run's.
# (Each step sleeps a little while WORK/pace exists: lib.sh, pace_on.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
corpus_begin openmp "$@"

cat >"$WORK/jacobi.c" <<'C'
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#define N 2048
int main(void) {
  double *a = malloc(sizeof(double) * N * N), *b = malloc(sizeof(double) * N * N);
  for (long i = 0; i < (long)N * N; i++) a[i] = b[i] = (double)((i * 2654435761u) % 1000) / 1000.0;
  printf("threads %d\n", omp_get_max_threads());
  for (int it = 0; it < 200; it++) {
#pragma omp parallel for schedule(static)
    for (int i = 1; i < N - 1; i++)
      for (int j = 1; j < N - 1; j++)
        b[i * N + j] = 0.25 * (a[(i - 1) * N + j] + a[(i + 1) * N + j] + a[i * N + j - 1] + a[i * N + j + 1]);
    double *t = a;
    a = b;
    b = t;
    if (it % 10 == 0) printf("iter %d\n", it), fflush(stdout);
    if (access("pace", F_OK) == 0) nanosleep(&(struct timespec){0, 100000000}, NULL);
  }
  unsigned long long h = 1469598103934665603ull;
  for (long i = 0; i < (long)N * N; i++) {
    unsigned long long v;
    memcpy(&v, &a[i], sizeof v);
    h = (h ^ v) * 1099511628211ull;
  }
  printf("result %016llx\n", h);
  return 0;
}
C
run_fg cc gcc -O2 -fopenmp -o jacobi jacobi.c
t=$EPOCHREALTIME
run_fg ref ./jacobi
phase "uninterrupted" "$t"
pace_on
start_bg run ./jacobi
wait_until 60 "first iterations" 'grep -q "^iter 10$" "$WORK/run.out"'
checkpoint full
sleep 0.5
checkpoint incr
! grep -q '^result' "$WORK/run.out" || fail "the program finished before it was killed"
kill_tree
pace_off
restore_wait
ref=$(grep '^result' "$WORK/ref.out")
got=$(grep '^result' "$WORK/run.out") || fail "the restored program printed no result"
[[ $got == "$ref" ]] || fail "the restored program's $got differs from an uninterrupted run's $ref"
corpus_pass "$(grep '^threads' "$WORK/run.out")"
