// unix_pair READY WORKDIR [ROUNDS]: two processes talking over UNIX sockets,
// for cr_full --tree (job.sh with E2E_JOB_PROG=unix_pair E2E_JOB_PROCS=2).
// Before the fork the root makes: a stream socketpair, a seqpacket
// socketpair, a half-closed stream pair (the child writes "half-closed" and
// shuts its sending side), a half-closed seqpacket pair (one record, then
// the child's shutdown), a datagram socket bound to WORKDIR/dg.sock and an
// abstract listener (SO_PASSCRED on the seqpacket end). The child connects to the listener
// (the root accepts), binds an abstract datagram socket, and keeps an
// unnamed one. Each round the root sends, one round ahead of the child, a
// 4 KiB block on the stream pair, two seqpackets and a datagram to the
// child's abstract socket, all of sizes fixed by the round; the child checks
// each (exact bytes, message boundaries, the datagram's sender name) and
// answers with a checksum on its connection and with two datagrams to
// dg.sock (one from its named socket, one from its unnamed one), which the
// root checks (content, sender names). Both sleep between steps, so data
// waits in queues in both directions at any moment. At the end the child
// connects to the listener once more and sends its total; the root reads
// the half-closed pair to its end and checks SO_PASSCRED, then "done".
#define _GNU_SOURCE
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "e2e.h"

#define BLOCK 4096
static long nrounds = 300;
static char lname[64], cname[64];  // abstract names (leading NUL)
static size_t llen, clen;
static char dgpath[200];

static void fill(uint8_t* b, size_t n, long round, int salt) {
  for (size_t i = 0; i < n; i++)
    b[i] = (uint8_t)(e2e_mix(((uint64_t)round << 32) ^ ((uint64_t)salt << 20) ^ i) >> 7);
}
static uint64_t sum(const uint8_t* b, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; i++) s = e2e_mix(s ^ b[i] ^ (i << 8));
  return s;
}
static size_t seq_len(long r, int k) {
  return (size_t)((r * 7 + k * 13) % 300) + 1;
}
static size_t dg_len(long r) {
  return (size_t)((r * 37) % 1500) + 1;
}

static void io_all(int fd, void* buf, size_t len, int out, const char* what) {
  char* p = buf;
  while (len > 0) {
    ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) e2e_fail("%s: %s", what, n == 0 ? "end of file" : strerror(errno));
    p += n;
    len -= (size_t)n;
  }
}

static socklen_t abstract(struct sockaddr_un* a, const char* name, size_t len) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  memcpy(a->sun_path, name, len);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}
static socklen_t by_path(struct sockaddr_un* a, const char* path) {
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  strcpy(a->sun_path, path);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
}

// One message of exactly `want` bytes (a datagram or seqpacket), and its sender.
static void recv_msg(int fd, uint8_t* buf, size_t want, struct sockaddr_un* from, socklen_t* flen,
                     const char* what) {
  uint8_t big[65536];
  ssize_t n;
  do n = recvfrom(fd, big, sizeof big, 0, (struct sockaddr*)from, flen);
  while (n < 0 && errno == EINTR);
  if (n < 0) e2e_fail("%s: %s", what, strerror(errno));
  if ((size_t)n != want)
    e2e_fail("%s: a message of %zd bytes, expected %zu (boundaries lost)", what, n, want);
  memcpy(buf, big, want);
}

static void child(int st, int sq, int half, int sqhalf) {
  struct sockaddr_un a;
  int conn = socket(AF_UNIX, SOCK_STREAM, 0);
  if (connect(conn, (struct sockaddr*)&a, abstract(&a, lname, llen)) != 0)
    e2e_fail("child: connect to the listener: %s", strerror(errno));
  int named = socket(AF_UNIX, SOCK_DGRAM, 0), unnamed = socket(AF_UNIX, SOCK_DGRAM, 0);
  if (bind(named, (struct sockaddr*)&a, abstract(&a, cname, clen)) != 0)
    e2e_fail("child: bind: %s", strerror(errno));
  io_all(half, "half-closed", 11, 1, "child: writing the half-closed pair");
  shutdown(half, SHUT_WR);
  if (send(sqhalf, "seq-end", 7, 0) != 7) e2e_fail("child: seqpacket record: %s", strerror(errno));
  shutdown(sqhalf, SHUT_WR);
  io_all(conn, "k", 1, 1, "child: hello");  // the root waits for this before it is ready
  uint8_t buf[BLOCK], want[BLOCK];
  uint64_t total = 0;
  for (long r = 1; r <= nrounds; r++) {
    io_all(st, buf, BLOCK, 0, "child: reading a block");
    fill(want, BLOCK, r, 0);
    if (memcmp(buf, want, BLOCK) != 0) e2e_fail("child: stream block of round %ld is wrong", r);
    uint64_t s = sum(buf, BLOCK);
    for (int k = 0; k < 2; k++) {
      socklen_t fl = sizeof a;
      recv_msg(sq, buf, seq_len(r, k), &a, &fl, "child: seqpacket");
      fill(want, seq_len(r, k), r, 1 + k);
      if (memcmp(buf, want, seq_len(r, k)) != 0)
        e2e_fail("child: seqpacket %d of round %ld is wrong", k, r);
      s ^= sum(buf, seq_len(r, k));
    }
    socklen_t fl = sizeof a;
    recv_msg(named, buf, dg_len(r), &a, &fl, "child: datagram");
    if (fl != offsetof(struct sockaddr_un, sun_path) + strlen(dgpath) + 1 ||
        strcmp(a.sun_path, dgpath) != 0)
      e2e_fail("child: datagram of round %ld not from %s", r, dgpath);
    fill(want, dg_len(r), r, 3);
    if (memcmp(buf, want, dg_len(r)) != 0) e2e_fail("child: datagram of round %ld is wrong", r);
    s ^= sum(buf, dg_len(r));
    total ^= s;
    e2e_pace(5);  // the root's next round waits in our queues
    io_all(conn, &s, sizeof s, 1, "child: answering");
    socklen_t pl = by_path(&a, dgpath);
    uint64_t tagged[2] = {s, (uint64_t)r};
    if (sendto(named, tagged, sizeof tagged, 0, (struct sockaddr*)&a, pl) != sizeof tagged ||
        sendto(unnamed, &tagged[1], 8, 0, (struct sockaddr*)&a, pl) != 8)
      e2e_fail("child: datagram answer: %s", strerror(errno));
  }
  char ok[2];
  io_all(half, ok, 2, 0, "child: reading the root's last word on the half-closed pair");
  if (memcmp(ok, "ok", 2) != 0) e2e_fail("child: wrong last word");
  int late = socket(AF_UNIX, SOCK_STREAM, 0);
  if (connect(late, (struct sockaddr*)&a, abstract(&a, lname, llen)) != 0)
    e2e_fail("child: late connect: %s", strerror(errno));
  io_all(late, &total, sizeof total, 1, "child: sending the total");
  close(late);
  exit(0);
}

static void send_round(int st, int sq, int dg, long r) {
  uint8_t b[BLOCK];
  fill(b, BLOCK, r, 0);
  io_all(st, b, BLOCK, 1, "root: sending a block");
  for (int k = 0; k < 2; k++) {
    fill(b, seq_len(r, k), r, 1 + k);
    if (send(sq, b, seq_len(r, k), 0) != (ssize_t)seq_len(r, k))
      e2e_fail("root: seqpacket: %s", strerror(errno));
  }
  struct sockaddr_un a;
  fill(b, dg_len(r), r, 3);
  if (sendto(dg, b, dg_len(r), 0, (struct sockaddr*)&a, abstract(&a, cname, clen)) !=
      (ssize_t)dg_len(r))
    e2e_fail("root: datagram: %s", strerror(errno));
}

int main(int argc, char** argv) {
  e2e_init(argc, argv, 3, "READY WORKDIR [ROUNDS]");
  if (argc > 3) nrounds = atol(argv[3]);
  snprintf(dgpath, sizeof dgpath, "%s/dg.sock", argv[2]);
  llen = 1 + (size_t)snprintf(lname + 1, sizeof lname - 1, "unix_pair_%d_l", getpid());
  clen = 1 + (size_t)snprintf(cname + 1, sizeof cname - 1, "unix_pair_%d_c", getpid());
  int st[2], sq[2], half[2], sqhalf[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, st) || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sq) ||
      socketpair(AF_UNIX, SOCK_STREAM, 0, half) || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sqhalf))
    e2e_fail("socketpair: %s", strerror(errno));
  struct sockaddr_un a;
  int l = socket(AF_UNIX, SOCK_STREAM, 0), dg = socket(AF_UNIX, SOCK_DGRAM, 0);
  unlink(dgpath);
  if (bind(l, (struct sockaddr*)&a, abstract(&a, lname, llen)) != 0 || listen(l, 4) != 0 ||
      bind(dg, (struct sockaddr*)&a, by_path(&a, dgpath)) != 0)
    e2e_fail("bind/listen: %s", strerror(errno));
  int one = 1;
  // SO_PASSCRED on the seqpacket end (on dg it would autobind the child's
  // unnamed sender at its first datagram).
  setsockopt(sq[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  fflush(NULL);
  pid_t c = fork();
  if (c < 0) e2e_fail("fork: %s", strerror(errno));
  if (c == 0) {
    e2e_name = "unix_pair (child)";
    close(st[0]), close(sq[0]), close(half[0]), close(sqhalf[0]), close(l), close(dg);
    child(st[1], sq[1], half[1], sqhalf[1]);
  }
  close(st[1]), close(sq[1]), close(half[1]), close(sqhalf[1]);
  int conn = accept(l, NULL, NULL);
  if (conn < 0) e2e_fail("accept: %s", strerror(errno));
  char hello;
  io_all(conn, &hello, 1, 0, "root: hello");
  send_round(st[0], sq[0], dg, 1);
  e2e_ready(argv[1]);
  uint64_t total = 0;
  for (long r = 1; r <= nrounds; r++) {
    if (r < nrounds) send_round(st[0], sq[0], dg, r + 1);  // one round ahead
    e2e_pace(10);                                          // the child's answers wait in our queues
    uint64_t s, tagged[2];
    io_all(conn, &s, sizeof s, 0, "root: reading an answer");
    uint8_t want[BLOCK];
    uint64_t expect = 0;
    fill(want, BLOCK, r, 0);
    expect = sum(want, BLOCK);
    for (int k = 0; k < 2; k++)
      fill(want, seq_len(r, k), r, 1 + k), expect ^= sum(want, seq_len(r, k));
    fill(want, dg_len(r), r, 3);
    expect ^= sum(want, dg_len(r));
    if (s != expect) e2e_fail("root: answer of round %ld is wrong", r);
    total ^= s;
    // The two datagrams, in the order sent: from the child's named socket, then its unnamed one.
    socklen_t fl = sizeof a;
    recv_msg(dg, (uint8_t*)tagged, sizeof tagged, &a, &fl, "root: datagram from the named socket");
    if (fl != offsetof(struct sockaddr_un, sun_path) + clen || memcmp(a.sun_path, cname, clen) != 0)
      e2e_fail("root: datagram of round %ld: sender is not the child's abstract socket", r);
    if (tagged[0] != s || tagged[1] != (uint64_t)r)
      e2e_fail("root: datagram of round %ld is wrong", r);
    fl = sizeof a;
    recv_msg(dg, (uint8_t*)tagged, 8, &a, &fl, "root: datagram from the unnamed socket");
    if (fl > offsetof(struct sockaddr_un, sun_path))
      e2e_fail("root: unnamed datagram has a sender name");
    if (tagged[0] != (uint64_t)r) e2e_fail("root: unnamed datagram of round %ld is wrong", r);
  }
  char h[16];
  io_all(half[0], h, 11, 0, "root: reading the half-closed pair");
  if (memcmp(h, "half-closed", 11) != 0) e2e_fail("root: wrong bytes on the half-closed pair");
  if (read(half[0], h, 1) != 0) e2e_fail("root: the half-closed pair is not at end of file");
  io_all(half[0], "ok", 2, 1, "root: last word");
  // The half-closed seqpacket pair: one record, then end of file.
  if (recv(sqhalf[0], h, sizeof h, 0) != 7 || memcmp(h, "seq-end", 7) != 0)
    e2e_fail("root: the seqpacket record before the shutdown is lost");
  if (recv(sqhalf[0], h, sizeof h, 0) != 0)
    e2e_fail("root: the seqpacket pair is not at end of file");
  int pc = 0;
  socklen_t pl = sizeof pc;
  if (getsockopt(sq[0], SOL_SOCKET, SO_PASSCRED, &pc, &pl) != 0 || !pc)
    e2e_fail("root: SO_PASSCRED lost");
  int late = accept(l, NULL, NULL);
  if (late < 0) e2e_fail("accept after the rounds: %s", strerror(errno));
  uint64_t got;
  io_all(late, &got, sizeof got, 0, "root: reading the total");
  close(late);
  if (got != total) e2e_fail("root: the child's total differs");
  int status;
  if (waitpid(c, &status, 0) != c || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    e2e_fail("child failed (status 0x%x)", status);
  unlink(dgpath);
  e2e_done();
}
