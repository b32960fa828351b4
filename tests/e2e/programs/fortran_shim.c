// The e2e protocol (e2e.h) for fortran_jacobi.f90, callable from Fortran.
#include "e2e.h"

static char** f_argv;
static int f_argc;

// gfortran's runtime keeps argc/argv; glibc passes them to constructors too.
__attribute__((constructor)) static void grab_args(int argc, char** argv) {
  f_argc = argc;
  f_argv = argv;
}

void e2e_f_init(void) {
  e2e_init(f_argc, f_argv, 0, "READY");
}
void e2e_f_ready(void) {
  e2e_ready(f_argv[1]);
}
void e2e_f_sleep_ms(long ms) {
  e2e_sleep_ms(ms);
}
int e2e_f_sabotage(void) {
  return e2e_sabotage();
}
void e2e_f_fail(int column) {
  e2e_fail("result differs from the reference in column %d", column);
}
void e2e_f_done(void) {
  e2e_done();
}
