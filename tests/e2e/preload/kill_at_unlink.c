// kill_at_unlink.so: preloaded into cr_full by chain_dir.sh (never part of
// the library). Every successful unlink(2) of a file inside a generation's
// directory (a path with "/gen-" or "/.removing-" in it) is counted;
// CKPT_KILL_AT_UNLINK=N makes the tool SIGKILL itself right after the Nth,
// leaving the directory exactly as that deletion left it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long deletions;

int unlink(const char* path) {
  static int (*real)(const char*);
  if (!real) real = (int (*)(const char*))dlsym(RTLD_NEXT, "unlink");
  int r = real(path);
  if (r == 0 && (strstr(path, "/gen-") || strstr(path, "/.removing-"))) {
    const char* at = getenv("CKPT_KILL_AT_UNLINK");
    if (at && atol(at) == ++deletions) kill(getpid(), SIGKILL);
  }
  return r;
}
