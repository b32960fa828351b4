// fd_locks READY DIR: the three kinds of file lock across a checkpoint.
// Before ready it takes, in files it makes in DIR:
//   fd 3  DIR/flock.f   flock(LOCK_EX)
//   fd 4  DIR/posix.f   POSIX write lock on bytes 0-99, read lock from 200 to EOF
//   fd 5  DIR/ofd.f     OFD write lock on bytes 10-19 (F_OFD_SETLK)
//   fd 6  DIR/shared.f  flock(LOCK_SH), and a dup of it at fd 7
// then waits ~2 s (the driver checkpoints, kills and restores meanwhile), and
// a child it forks (another lock owner, on open file descriptions of its
// own) checks that each lock is held, by this PID where the kernel tells
// (F_GETLK, /proc/locks), and that nothing else is: the child does so once
// before ready too. Sabotage: the POSIX write lock is dropped before ready.
#define _GNU_SOURCE
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "e2e.h"

#define HOLD_MS 2000

static char dir_path[3000];

static int make(const char* name, int want_fd) {
  char p[3100];
  snprintf(p, sizeof p, "%s/%s", dir_path, name);
  int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) e2e_fail("open %s: %s", p, strerror(errno));
  if (ftruncate(fd, 4096) != 0) e2e_fail("ftruncate %s: %s", p, strerror(errno));
  if (fd != want_fd) {
    if (dup2(fd, want_fd) != want_fd) e2e_fail("dup2: %s", strerror(errno));
    close(fd);
  }
  return want_fd;
}

static void record_lock(int fd, int cmd, short type, off_t start, off_t len) {
  struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
  if (fcntl(fd, cmd, &fl) != 0) e2e_fail("fcntl lock on fd %d: %s", fd, strerror(errno));
}

// In a child: what another process sees of `owner`'s locks. Exits 0 if
// everything is as set up, 1 with the first difference on stderr.
static void check_from_child(pid_t owner, const char* when) {
  char p[3100];
  // flock: a new open file description cannot take it (exclusive), and can
  // share the shared one but not take it exclusively.
  snprintf(p, sizeof p, "%s/flock.f", dir_path);
  int f = open(p, O_RDONLY);
  if (f < 0) e2e_fail("%s: open %s: %s", when, p, strerror(errno));
  if (flock(f, LOCK_SH | LOCK_NB) == 0 || errno != EWOULDBLOCK)
    e2e_fail("%s: flock.f is not locked exclusively", when);
  struct stat st;
  if (fstat(f, &st) != 0) e2e_fail("fstat: %s", strerror(errno));
  snprintf(p, sizeof p, "%s/shared.f", dir_path);
  int s = open(p, O_RDONLY);
  if (s < 0 || flock(s, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
    e2e_fail("%s: shared.f has no shared flock", when);
  if (flock(s, LOCK_SH | LOCK_NB) != 0) e2e_fail("%s: shared.f: not a shared flock", when);
  // /proc/locks names the flock's holder.
  FILE* pl = fopen("/proc/locks", "r");
  char line[512], want[128];
  snprintf(want, sizeof want, "FLOCK  ADVISORY  WRITE %d %02x:%02x:%llu ", (int)owner,
           major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino);
  int found = 0;
  while (pl && fgets(line, sizeof line, pl)) found |= strstr(line, want) != NULL;
  if (pl) fclose(pl);
  if (!found) e2e_fail("%s: /proc/locks has no \"%s\"", when, want);

  // POSIX: F_GETLK names the owner.
  snprintf(p, sizeof p, "%s/posix.f", dir_path);
  int x = open(p, O_RDWR);
  if (x < 0) e2e_fail("%s: open %s: %s", when, p, strerror(errno));
  struct flock q = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 1};
  if (fcntl(x, F_GETLK, &q) != 0) e2e_fail("F_GETLK: %s", strerror(errno));
  if (q.l_type != F_WRLCK || q.l_pid != owner || q.l_start != 0 || q.l_len != 100)
    e2e_fail(
        "%s: posix.f bytes 0-99: type %d pid %d start %lld len %lld, expected a write lock "
        "of PID %d",
        when, q.l_type, (int)q.l_pid, (long long)q.l_start, (long long)q.l_len, (int)owner);
  q = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 5000, .l_len = 1};
  if (fcntl(x, F_GETLK, &q) != 0) e2e_fail("F_GETLK: %s", strerror(errno));
  if (q.l_type != F_RDLCK || q.l_pid != owner || q.l_start != 200 || q.l_len != 0)
    e2e_fail("%s: posix.f from 200: type %d pid %d, expected a read lock of PID %d to EOF", when,
             q.l_type, (int)q.l_pid, (int)owner);
  q = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 100};
  if (fcntl(x, F_GETLK, &q) != 0 || q.l_type != F_UNLCK)
    e2e_fail("%s: posix.f bytes 100-199 are locked", when);

  // OFD: F_OFD_GETLK on an open file description of our own.
  snprintf(p, sizeof p, "%s/ofd.f", dir_path);
  int o = open(p, O_RDWR);
  if (o < 0) e2e_fail("%s: open %s: %s", when, p, strerror(errno));
  q = (struct flock){.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
  if (fcntl(o, F_OFD_GETLK, &q) != 0) e2e_fail("F_OFD_GETLK: %s", strerror(errno));
  if (q.l_type != F_WRLCK || q.l_pid != -1 || q.l_start != 10 || q.l_len != 10)
    e2e_fail("%s: ofd.f: type %d pid %d start %lld len %lld, expected an OFD write lock on 10-19",
             when, q.l_type, (int)q.l_pid, (long long)q.l_start, (long long)q.l_len);
  exit(0);
}

static void check(const char* when) {
  pid_t owner = getpid();
  pid_t kid = fork();
  if (kid < 0) e2e_fail("fork: %s", strerror(errno));
  if (kid == 0) check_from_child(owner, when);
  int status;
  if (waitpid(kid, &status, 0) != kid) e2e_fail("waitpid: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) exit(1);  // the child said why
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY DIR");
  snprintf(dir_path, sizeof dir_path, "%s", argv[2]);
  for (int fd = 3; fd <= 7; fd++) close(fd);
  int fl = make("flock.f", 3), px = make("posix.f", 4), ofd = make("ofd.f", 5),
      sh = make("shared.f", 6);
  if (flock(fl, LOCK_EX) != 0) e2e_fail("flock: %s", strerror(errno));
  record_lock(px, F_SETLK, F_WRLCK, 0, 100);
  record_lock(px, F_SETLK, F_RDLCK, 200, 0);
  record_lock(ofd, F_OFD_SETLK, F_WRLCK, 10, 10);
  if (flock(sh, LOCK_SH) != 0) e2e_fail("flock: %s", strerror(errno));
  if (dup2(sh, 7) != 7) e2e_fail("dup2: %s", strerror(errno));
  check("before the checkpoint");
  if (e2e_sabotage()) record_lock(px, F_SETLK, F_UNLCK, 0, 100);
  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);
  e2e_hold();
  check("at the end");
  e2e_done();
}
