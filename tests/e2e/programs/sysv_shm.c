// sysv_shm READY WORKDIR [ROUNDS]: SysV shared memory between two processes,
// for cr_full --tree (job.sh with E2E_JOB_PROG=sysv_shm E2E_JOB_PROCS=2).
// The root makes a private segment (IPC_PRIVATE, 3 pages and 100 bytes,
// mode 0640), attaches it, forks, and marks it removed (IPC_RMID) once the
// child has it; and a segment with a key (mode 0600, 5 pages), which the
// child attaches on its own by key at another address. Each round the child
// writes the round number and a page of content fixed by it into both
// segments (pages the root never writes), and the root writes its own
// round into another page that the child checks. Each side checks that what
// the other wrote is whole and never goes back in time: a restore that lost
// pages written by one member shows older content than the other had seen.
// At the end both check the segments by id (the ids the program got before
// the checkpoint: the same after a restore), the key, size and mode, and
// detach them (shmdt finds real attachments).
// Also, as UCX does: a file in /dev/shm, mapped shared by both, unlinked,
// whose fd the root keeps; the child writes a page through the mapping, the
// root writes one through the fd (pwrite); at the end the root checks that
// the fd and the mapping still show the same file.
#define _GNU_SOURCE
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>

#include "e2e.h"

#define PAGE 4096
static long nrounds = 300;

struct page {
  volatile uint64_t round;
  uint64_t data[PAGE / 8 - 1];
};

static void fill(struct page* p, uint64_t round, int salt) {
  for (size_t i = 0; i < PAGE / 8 - 1; i++)
    p->data[i] = e2e_mix((round << 20) ^ ((uint64_t)salt << 12) ^ i);
  __atomic_store_n(&p->round, round, __ATOMIC_RELEASE);
}

// The page's round, if its content matches it (0 while never written).
static uint64_t check(const struct page* p, int salt, uint64_t seen, const char* who) {
  for (int tries = 0; tries < 100; tries++) {
    uint64_t r = __atomic_load_n(&p->round, __ATOMIC_ACQUIRE);
    if (r < seen)
      e2e_fail("%s: page went back from round %llu to %llu", who, (unsigned long long)seen,
               (unsigned long long)r);
    int ok = 1;
    for (size_t i = 0; i < PAGE / 8 - 1 && r; i++)
      if (p->data[i] != e2e_mix((r << 20) ^ ((uint64_t)salt << 12) ^ i)) ok = 0;
    if (ok && __atomic_load_n(&p->round, __ATOMIC_ACQUIRE) == r) return r;
    e2e_sleep_ms(1);  // caught mid-write: read again
  }
  e2e_fail("%s: page content does not match its round", who);
}

static void check_segment(int id, size_t size, int mode, key_t key, const char* who) {
  struct shmid_ds ds;
  if (shmctl(id, IPC_STAT, &ds) != 0) e2e_fail("%s: segment %d: %s", who, id, strerror(errno));
  if (ds.shm_segsz != size || (int)(ds.shm_perm.mode & 0777) != mode)
    e2e_fail("%s: segment %d: size %zu mode %o, expected %zu %o", who, id, (size_t)ds.shm_segsz,
             ds.shm_perm.mode & 0777, size, mode);
  if (key != IPC_PRIVATE && shmget(key, 0, 0) != id)
    e2e_fail("%s: key no longer finds segment %d", who, id);
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 3, "READY WORKDIR [ROUNDS]");
  if (argc > 3) nrounds = atol(argv[3]);
  const size_t psize = 3 * PAGE + 100, ksize = 5 * PAGE;
  const key_t key = (key_t)(0x5e500000 | (getpid() & 0xfffff));
  int pid_seg = shmget(IPC_PRIVATE, psize, IPC_CREAT | 0640);
  int key_seg = shmget(key, ksize, IPC_CREAT | IPC_EXCL | 0600);
  if (pid_seg < 0 || key_seg < 0) e2e_fail("shmget: %s", strerror(errno));
  struct page* priv = shmat(pid_seg, NULL, 0);
  if (priv == (void*)-1) e2e_fail("shmat: %s", strerror(errno));
  char dpath[200];
  snprintf(dpath, sizeof dpath, "/dev/shm/ckpt_e2e_sysv_%d", getpid());
  int dfd = open(dpath, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (dfd < 0 || ftruncate(dfd, 4 * PAGE) != 0) e2e_fail("%s: %s", dpath, strerror(errno));
  struct page* del = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
  if (del == MAP_FAILED) e2e_fail("mmap %s: %s", dpath, strerror(errno));
  unlink(dpath);
  int go[2];
  if (pipe(go) != 0) e2e_fail("pipe: %s", strerror(errno));
  fflush(NULL);
  pid_t c = fork();
  if (c < 0) e2e_fail("fork: %s", strerror(errno));
  if (c == 0) {
    e2e_name = "sysv_shm (child)";
    close(go[1]);
    struct page* keyed = shmat(shmget(key, 0, 0), NULL, 0);
    if (keyed == (void*)-1) e2e_fail("shmat by key: %s", strerror(errno));
    char b;
    if (read(go[0], &b, 1) != 1) e2e_fail("no go");
    uint64_t seen = 0;
    for (long r = 1; r <= nrounds; r++) {
      fill(&priv[1], (uint64_t)r, 1);
      fill(&keyed[3], (uint64_t)r, 2);
      fill(&del[1], (uint64_t)r, 5);
      seen = check(&priv[0], 0, seen, "child");
      e2e_pace(10);
    }
    check_segment(pid_seg, psize, 0640, IPC_PRIVATE, "child");
    check_segment(key_seg, ksize, 0600, key, "child");
    if (shmdt(keyed) != 0 || shmdt(priv) != 0) e2e_fail("child: shmdt: %s", strerror(errno));
    exit(0);
  }
  close(go[0]);
  struct page* keyed = shmat(key_seg, NULL, 0);
  if (keyed == (void*)-1) e2e_fail("shmat: %s", strerror(errno));
  fill(&priv[0], 1, 0);
  if (write(go[1], "g", 1) != 1) e2e_fail("go: %s", strerror(errno));
  // The child holds the private segment: mark it removed (it stays while attached).
  if (shmctl(pid_seg, IPC_RMID, NULL) != 0) e2e_fail("IPC_RMID: %s", strerror(errno));
  while (__atomic_load_n(&priv[1].round, __ATOMIC_ACQUIRE) == 0) e2e_sleep_ms(1);
  e2e_ready(argv[1]);
  uint64_t seen1 = 0, seen2 = 0;
  uint64_t seen3 = 0;
  for (long r = 1; r <= nrounds; r++) {
    fill(&priv[0], (uint64_t)r, 0);
    struct page pg;
    fill(&pg, (uint64_t)r, 6);
    if (pwrite(dfd, &pg, PAGE, 2 * PAGE) != PAGE) e2e_fail("pwrite: %s", strerror(errno));
    seen3 = check(&del[2], 6, seen3, "root (deleted file, written through its fd)");
    check(&del[1], 5, 0, "root (deleted file)");
    seen1 = check(&priv[1], 1, seen1, "root (private segment)");
    seen2 = check(&keyed[3], 2, seen2, "root (keyed segment)");
    e2e_pace(10);
  }
  int st;
  if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    e2e_fail("child failed (status 0x%x)", st);
  if (seen1 != (uint64_t)nrounds && check(&priv[1], 1, seen1, "root") != (uint64_t)nrounds)
    e2e_fail("root: the child's last round is missing");
  struct page pg;
  if (pread(dfd, &pg, PAGE, PAGE) != PAGE || memcmp(&pg, &del[1], PAGE) != 0)
    e2e_fail("root: the deleted file's fd and its mapping differ");
  check_segment(pid_seg, psize, 0640, IPC_PRIVATE, "root");
  check_segment(key_seg, ksize, 0600, key, "root");
  if (shmdt(keyed) != 0 || shmdt(priv) != 0) e2e_fail("root: shmdt: %s", strerror(errno));
  // The private segment went with its last detach; the keyed one is ours to remove.
  if (shmctl(pid_seg, IPC_STAT, &(struct shmid_ds){0}) == 0)
    e2e_fail("removed segment still there");
  shmctl(key_seg, IPC_RMID, NULL);
  e2e_done();
}
