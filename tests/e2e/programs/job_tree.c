// job_tree READY WORKDIR [ROUNDS]: a small job for cr_full --tree. The root
// becomes a session leader and makes
//   - shared anonymous memory (MAP_SHARED|MAP_ANONYMOUS) written by everyone;
//   - a pipe whose read end a child holds, with bytes left unread in it;
//   - a regular file opened before fork, so all write at one shared offset
//     (each appends once, after the checkpoint, A then B then the root);
//   - child A, leader of its own process group; child B, a member of A's
//     group (a group led by a sibling); child Z, which exits with status 7
//     and stays a zombie until the root reaps it at the very end.
// After ready, A and B and the root count rounds in their own slot of the
// shared memory, rewriting a pattern. At the end every process checks its
// own state (PIDs, groups, session, counts, pattern, unread bytes), the
// children exit 0 on success and the root checks their statuses, the
// zombie's 7 and the file's shared-offset content, then prints "done".
// Rounds are paced by E2E_PACE_FILE (e2e.h), as in the other job programs.
#define _GNU_SOURCE
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "e2e.h"

#define SHM_BYTES (8u << 20)
#define SLOTS 4
static const char kUnread[] = "unread bytes that must survive the restore";

struct Shared {
  volatile uint64_t rounds[SLOTS];  // rounds done by root, A, B
  volatile uint64_t go;             // set by the root once everyone is ready
  volatile uint64_t ready[SLOTS];
  volatile uint64_t wrote[SLOTS];  // appended to the shared file (after restore)
};

static struct Shared* shm;
static uint64_t* pattern;  // the rest of the shared region
static size_t pattern_words;
static long nrounds = 200;

static void work(int slot) {
  for (long r = 1; r <= nrounds; ++r) {
    // Each process rewrites its own third of the pattern with round r.
    size_t third = pattern_words / 3, lo = third * (size_t)slot, hi = lo + third;
    for (size_t i = lo; i < hi; i += 512) pattern[i] = e2e_mix(i ^ ((uint64_t)r << 40));
    shm->rounds[slot] = (uint64_t)r;
    e2e_pace(10);
  }
}

static void check_pattern(int slot) {
  size_t third = pattern_words / 3, lo = third * (size_t)slot, hi = lo + third;
  for (size_t i = lo; i < hi; i += 512)
    if (pattern[i] != e2e_mix(i ^ ((uint64_t)nrounds << 40)))
      e2e_fail("slot %d: shared word %zu is wrong", slot, i);
}

static void check_ids(pid_t want_pgid, pid_t want_sid) {
  if (getpgid(0) != want_pgid) e2e_fail("process group %d, expected %d", getpgid(0), want_pgid);
  if (getsid(0) != want_sid) e2e_fail("session %d, expected %d", getsid(0), want_sid);
}

static void wait_go(int slot) {
  shm->ready[slot] = 1;
  while (!shm->go) e2e_sleep_ms(1);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2, "READY WORKDIR [ROUNDS]");
  if (argc > 3) nrounds = atol(argv[3]);
  if (setsid() < 0) e2e_fail("setsid: %s", strerror(errno));
  const pid_t root = getpid();
  void* p = mmap(NULL, SHM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) e2e_fail("mmap: %s", strerror(errno));
  shm = p;
  pattern = (uint64_t*)((char*)p + 4096);
  pattern_words = (SHM_BYTES - 4096) / 8;

  char path[4096];
  snprintf(path, sizeof path, "%s/shared-offset.txt", argv[2]);
  int file = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (file < 0) e2e_fail("open %s: %s", path, strerror(errno));
  int pp[2];
  if (pipe(pp) != 0) e2e_fail("pipe: %s", strerror(errno));

  pid_t z = fork();
  if (z == 0) _exit(7);
  pid_t a = fork();
  if (a == 0) {
    close(pp[1]);
    if (setpgid(0, 0) != 0) e2e_fail("A: setpgid: %s", strerror(errno));
    wait_go(1);
    work(1);
    // Written after the checkpoint: only a shared open file puts A, B and
    // the root's bytes one after the other.
    if (write(file, "A", 1) != 1) e2e_fail("A: write: %s", strerror(errno));
    shm->wrote[1] = 1;
    check_ids(getpid(), root);
    if (getppid() != root) e2e_fail("A: parent %d, expected %d", getppid(), root);
    char buf[256];
    ssize_t n = read(pp[0], buf, sizeof buf);
    if (n != (ssize_t)sizeof kUnread || memcmp(buf, kUnread, sizeof kUnread) != 0)
      e2e_fail("A: read %zd unread bytes, expected %zu", n, sizeof kUnread);
    if (read(pp[0], buf, sizeof buf) != 0) e2e_fail("A: the pipe did not end");
    check_pattern(1);
    _exit(0);
  }
  // B joins A's group (made by A: wait until it exists).
  while (getpgid(a) != a) e2e_sleep_ms(1);
  pid_t b = fork();
  if (b == 0) {
    close(pp[0]);
    close(pp[1]);
    if (setpgid(0, a) != 0) e2e_fail("B: setpgid: %s", strerror(errno));
    wait_go(2);
    work(2);
    while (!shm->wrote[1]) e2e_sleep_ms(1);  // after A's write
    if (write(file, "B", 1) != 1) e2e_fail("B: write: %s", strerror(errno));
    shm->wrote[2] = 1;
    check_ids(a, root);
    check_pattern(2);
    _exit(0);
  }
  close(pp[0]);
  if (write(pp[1], kUnread, sizeof kUnread) != (ssize_t)sizeof kUnread) e2e_fail("pipe write");
  while (!shm->ready[1] || !shm->ready[2] || getpgid(b) != a) e2e_sleep_ms(1);
  // Z must be a zombie before the checkpoint (the root does not reap it yet).
  for (int i = 0;; ++i) {
    char st[64], f[64];
    snprintf(f, sizeof f, "/proc/%d/stat", (int)z);
    FILE* s = fopen(f, "r");
    if (s && fgets(st, sizeof st, s) && strstr(st, ") Z")) {
      fclose(s);
      break;
    }
    if (s) fclose(s);
    if (i > 5000) e2e_fail("Z did not exit");
    e2e_sleep_ms(1);
  }
  shm->go = 1;
  e2e_ready(argv[1]);
  work(0);
  while (shm->rounds[1] < (uint64_t)nrounds || shm->rounds[2] < (uint64_t)nrounds) e2e_sleep_ms(5);
  while (!shm->wrote[2]) e2e_sleep_ms(1);
  if (write(file, "R", 1) != 1) e2e_fail("root: write");
  close(pp[1]);
  int st;
  if (waitpid(a, &st, 0) != a || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    e2e_fail("child A ended with status %#x", st);
  if (waitpid(b, &st, 0) != b || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    e2e_fail("child B ended with status %#x", st);
  if (waitpid(z, &st, 0) != z || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
    e2e_fail("zombie Z ended with status %#x, expected exit 7", st);
  check_ids(root, root);
  check_pattern(0);
  char got[8] = {0};
  if (pread(file, got, sizeof got, 0) != 3 || strcmp(got, "ABR") != 0)
    e2e_fail("shared-offset file holds \"%s\", expected \"ABR\"", got);
  if (lseek(file, 0, SEEK_CUR) != 3) e2e_fail("file offset is not the shared 3");
  // The fds it had at ready time were closed on purpose (the pipe's write
  // end ends A's read): e2e_done's fd comparison does not apply.
  close(file);
  e2e_nfds = -1;
  e2e_done();
}
