// cwd_deleted READY DIR: works in a directory it made in DIR and that is
// removed while it is its working directory (as after `rm -rf` of a build
// tree under a running shell). After the restore its working directory is
// again a removed one: stat(".") finds no links, getcwd() fails with
// ENOENT, and nothing can be made in it.
#include <fcntl.h>
#include <sys/stat.h>

#include "e2e.h"

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY DIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/cwd_deleted.%d", argv[2], (int)getpid());
  if (mkdir(dir, 0755) != 0) e2e_fail("mkdir %s: %s", dir, strerror(errno));
  if (chdir(dir) != 0) e2e_fail("chdir %s: %s", dir, strerror(errno));
  if (rmdir(dir) != 0) e2e_fail("rmdir %s: %s", dir, strerror(errno));
  // Sabotage: a working directory that exists (the check must then fail).
  if (e2e_sabotage() && chdir(argv[2]) != 0) e2e_fail("chdir %s: %s", argv[2], strerror(errno));

  e2e_ready(argv[1]);
  e2e_hold();
  e2e_sleep_ms(500);

  struct stat st;
  if (stat(".", &st) != 0) e2e_fail("stat(\".\"): %s", strerror(errno));
  if (!S_ISDIR(st.st_mode)) e2e_fail("the working directory is not a directory");
  if (st.st_nlink != 0)
    e2e_fail("the working directory has %lu links, not 0", (unsigned long)st.st_nlink);
  char buf[4096];
  if (getcwd(buf, sizeof buf) != NULL || errno != ENOENT)
    e2e_fail("getcwd: %s, not ENOENT", getcwd(buf, sizeof buf) ? buf : strerror(errno));
  int fd = open("probe", O_CREAT | O_WRONLY, 0600);
  if (fd >= 0 || errno != ENOENT) e2e_fail("a file could be made in the removed working directory");
  e2e_done();
}
