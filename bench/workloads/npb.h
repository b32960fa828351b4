// What the NPB-like kernels share: size classes (S, W, A, B as in NPB), a
// clock, the progress line and NPB's verification line.
//
// Every kernel accepts "CLASS" (one letter) or "--class CLASS" as its first
// argument; the older kernels (cg, mg, sparse) still take their numeric
// arguments too. Each prints
//   "<name>: class C, ..."           what it computes and how much memory
//   "computing"                      once its memory is set up
//   "  step I/N ..."                 a periodic progress line
//   " Verification = SUCCESSFUL"     or UNSUCCESSFUL, from its own check
//   "result: ..."                    deterministic values (no timings)
// and exits 0 only when the check passed.
#ifndef NPB_H
#define NPB_H

#include <stdio.h>
#include <string.h>
#include <time.h>

static inline double npb_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// The class named by argv[1] ("A") or argv[1..2] ("--class A"); 0 when the
// arguments name none. *used: how many arguments it took.
static inline char npb_class_arg(int argc, char** argv, int* used) {
  *used = 0;
  const char* c = NULL;
  if (argc > 2 && strcmp(argv[1], "--class") == 0) {
    c = argv[2];
    *used = 2;
  } else if (argc > 1 && strlen(argv[1]) == 1 && strchr("SWAB", argv[1][0])) {
    c = argv[1];
    *used = 1;
  }
  if (!c || strlen(c) != 1 || !strchr("SWAB", c[0])) {
    if (*used == 2) return '?';
    *used = 0;
    return 0;
  }
  return c[0];
}

// Index of class c in "SWAB", -1 if none.
static inline int npb_class_index(char c) {
  const char* p = c ? strchr("SWAB", c) : NULL;
  return p ? (int)(p - "SWAB") : -1;
}

static inline void npb_progress(int step, int total, const char* what, double value) {
  printf("  step %d/%d  %s %.12e\n", step, total, what, value);
  fflush(stdout);
}

// Prints NPB's verification line; returns the exit status.
static inline int npb_verified(int ok) {
  printf(" Verification = %s\n", ok ? "SUCCESSFUL" : "UNSUCCESSFUL");
  fflush(stdout);
  return ok ? 0 : 1;
}

#endif
