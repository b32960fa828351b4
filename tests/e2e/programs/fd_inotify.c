// fd_inotify READY DIR: inotify instances across a checkpoint.
// Before ready:
//   instance A (O_NONBLOCK) watches, in DIR/watched: a file "log" for IN_MODIFY
//     (wd 1), a file "gone" added then removed (wd 2: a gap), the
//     directory itself for IN_CREATE | IN_DELETE (wd 3), a symbolic link
//     "link" itself (IN_DONT_FOLLOW, IN_ATTRIB; wd 4), and "once" with
//     IN_ONESHOT | IN_CLOSE_WRITE (wd 5);
//   instance B (blocking) at fd 40, a dup of it at fd 41, watching "log"
//     for IN_OPEN after four watches were added and removed (wd 5);
//   every event of the set-up read.
// Then it waits ~2 s (the driver checkpoints, kills and restores
// meanwhile), acts on every watched file and expects each event under the
// watch descriptor it was given before, and no other; instance A's flags
// and the dup's shared queue are checked as well.
// Sabotage: "log"'s watch on A is removed before ready.
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "e2e.h"

#define HOLD_MS 2000

static char dir[4096], log_path[4200], gone_path[4200], link_path[4200], once_path[4200],
    new_path[4200];

static void touch(const char* p) {
  int fd = open(p, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) e2e_fail("open %s: %s", p, strerror(errno));
  if (write(fd, "x", 1) != 1) e2e_fail("write %s", p);
  close(fd);
}

static int watch(int in, const char* p, uint32_t mask, int want) {
  int wd = inotify_add_watch(in, p, mask);
  if (wd != want) e2e_fail("watch on %s: wd %d, expected %d (%s)", p, wd, want, strerror(errno));
  return wd;
}

// Every event queued on `in` within `ms`: "wd:mask" words in `out`.
static int events(int in, int ms, char* out, size_t cap) {
  struct pollfd p = {in, POLLIN, 0};
  int n = 0;
  out[0] = 0;
  while (poll(&p, 1, ms) > 0) {
    char buf[4096] __attribute__((aligned(8)));
    ssize_t r = read(in, buf, sizeof buf);
    if (r <= 0) break;
    for (char* at = buf; at < buf + r;) {
      struct inotify_event* e = (struct inotify_event*)at;
      size_t len = strlen(out);
      snprintf(out + len, cap - len, "%s%d:%x", n ? " " : "", e->wd, e->mask & ~IN_ISDIR);
      n++;
      at += sizeof *e + e->len;
    }
    ms = 100;
  }
  return n;
}

static void expect(int in, const char* want, const char* what) {
  char got[4096];
  events(in, 1000, got, sizeof got);
  if (strcmp(got, want) != 0) e2e_fail("%s: events \"%s\", expected \"%s\"", what, got, want);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY DIR");
  // A directory of its own: the driver writes its logs in DIR.
  snprintf(dir, sizeof dir, "%s/watched", argv[2]);
  if (mkdir(dir, 0700) != 0) e2e_fail("mkdir %s: %s", dir, strerror(errno));
  snprintf(log_path, sizeof log_path, "%s/log", dir);
  snprintf(gone_path, sizeof gone_path, "%s/gone", dir);
  snprintf(link_path, sizeof link_path, "%s/link", dir);
  snprintf(once_path, sizeof once_path, "%s/once", dir);
  snprintf(new_path, sizeof new_path, "%s/new", dir);
  touch(log_path);
  touch(gone_path);
  touch(once_path);
  if (symlink("log", link_path) != 0) e2e_fail("symlink: %s", strerror(errno));

  int a = inotify_init1(IN_NONBLOCK);
  if (a < 0) e2e_fail("inotify_init1: %s", strerror(errno));
  int log_wd = watch(a, log_path, IN_MODIFY, 1);
  inotify_rm_watch(a, watch(a, gone_path, IN_MODIFY, 2));
  watch(a, dir, IN_CREATE | IN_DELETE, 3);
  watch(a, link_path, IN_ATTRIB | IN_DONT_FOLLOW, 4);
  watch(a, once_path, IN_CLOSE_WRITE | IN_ONESHOT, 5);

  int b0 = inotify_init();
  if (b0 < 0) e2e_fail("inotify_init: %s", strerror(errno));
  for (int i = 1; i <= 4; i++) inotify_rm_watch(b0, watch(b0, gone_path, IN_MODIFY, i));
  watch(b0, log_path, IN_OPEN, 5);
  if (dup2(b0, 40) != 40 || dup2(b0, 41) != 41) e2e_fail("dup2: %s", strerror(errno));
  close(b0);
  char drained[4096];
  events(a, 50, drained, sizeof drained);
  events(40, 50, drained, sizeof drained);
  if (e2e_sabotage()) inotify_rm_watch(a, log_wd), events(a, 50, drained, sizeof drained);

  e2e_ready(argv[1]);
  e2e_sleep_ms(HOLD_MS);

  if (!(fcntl(a, F_GETFL) & O_NONBLOCK)) e2e_fail("instance A lost O_NONBLOCK");
  if (fcntl(40, F_GETFL) & O_NONBLOCK) e2e_fail("instance B became non-blocking");
  // Nothing queued on either from the restore itself.
  expect(a, "", "instance A before any change");
  expect(40, "", "instance B before any change");

  int fd = open(log_path, O_WRONLY | O_APPEND);
  if (fd < 0 || write(fd, "y", 1) != 1) e2e_fail("writing log: %s", strerror(errno));
  close(fd);
  char want[64];
  snprintf(want, sizeof want, "1:%x", IN_MODIFY);
  expect(a, want, "log modified");
  snprintf(want, sizeof want, "5:%x", IN_OPEN);
  expect(41, want, "log opened (through the dup)");

  touch(new_path);
  unlink(new_path);
  snprintf(want, sizeof want, "3:%x 3:%x", IN_CREATE, IN_DELETE);
  expect(a, want, "a file made and removed in DIR");

  // The link itself, not "log" it points to.
  struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  if (utimensat(AT_FDCWD, link_path, ts, AT_SYMLINK_NOFOLLOW) != 0)
    e2e_fail("utimensat: %s", strerror(errno));
  snprintf(want, sizeof want, "4:%x", IN_ATTRIB);
  expect(a, want, "the link's times changed");

  touch(once_path);
  snprintf(want, sizeof want, "5:%x 5:%x", IN_CLOSE_WRITE, IN_IGNORED);
  expect(a, want, "the one-shot watch fired");
  touch(once_path);
  expect(a, "", "the one-shot watch after it fired");
  e2e_done();
}
