// fd_unsupported READY MODE: holds a file descriptor a checkpoint must refuse,
// at fd 3, signals ready, waits ~3 s and exits 0 if the fd is still intact.
//   tcp          a connected TCP socket (127.0.0.1) at fd 3, its listener at fd 4
//   unix         (in a forked child, the target) a UNIX stream socket at fd 3
//                whose peer the parent holds
//   unix-inflight  a UNIX socketpair at fds 3 and 4, with a descriptor sent
//                from 4 to 3 (SCM_RIGHTS) and not received; the queue is
//                checked after the refusal
//   shared-pipe  (in a forked child, the target) the read end of a pipe at fd 3
//                whose write end the parent holds
//   shared-fifo  the FIFO READY.fifo at fd 3, which the driver holds open too
//   lease        a file at fd 3 with a read lease on it (F_SETLEASE)
//   pidfd        a pidfd of the process itself at fd 3
//   inotify-unlinked  an inotify instance at fd 3 watching a file that was
//                unlinked since (still open at fd 4)
//   udp-multicast  a UDP socket at fd 3 that joined 239.1.2.3 on lo
//   udp-peeked-empty  a UDP socket at fd 3 whose queue holds one empty
//                datagram, which the program peeked (MSG_PEEK): a peek at an
//                offset cannot show it any more; it is still there after
//                the refusal
//   pty-stopped  a pty master at fd 3, its slave at fd 4, output stopped
//                (tcflow TCOOFF) and a line of input not read: both are still
//                so after the refusal
//   pty-session  (in a forked child, the target) a pty master at fd 3 whose
//                slave is the controlling terminal of the parent's session
//                (the parent holds no fd of it)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>

#include "e2e.h"

int main(int argc, char** argv) {
  e2e_init(argc, argv, 2,
           "READY "
           "tcp|unix|unix-inflight|shared-pipe|shared-fifo|lease|pidfd|inotify-unlinked|udp-"
           "multicast|udp-peeked-empty|pty-stopped|pty-session");
  const char* mode = argv[2];
  if (strcmp(mode, "tcp") == 0) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr*)&a, &len))
      e2e_fail("listen: %s", strerror(errno));
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr*)&a, sizeof a))
      e2e_fail("connect: %s", strerror(errno));
    // Connected socket at fd 3, the listener at fd 4 (the accepted one above).
    if (dup2(c, 100) < 0 || dup2(l, 101) < 0) e2e_fail("dup2: %s", strerror(errno));
    close(c);
    close(l);
    if (dup2(100, 3) != 3 || dup2(101, 4) != 4) e2e_fail("dup2: %s", strerror(errno));
    close(100);
    close(101);
  } else if (strcmp(mode, "unix") == 0) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) e2e_fail("socketpair: %s", strerror(errno));
    pid_t kid = fork();  // the child is the target; its parent holds the peer
    if (kid < 0) e2e_fail("fork: %s", strerror(errno));
    if (kid > 0) {
      close(sp[0]);
      int st = 0;
      waitpid(kid, &st, 0);
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
    e2e_pid = getpid();
    close(sp[1]);
    if (sp[0] != 3 && (dup2(sp[0], 3) != 3 || close(sp[0]))) e2e_fail("dup2: %s", strerror(errno));
  } else if (strcmp(mode, "unix-inflight") == 0) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0) e2e_fail("socketpair: %s", strerror(errno));
    if (dup2(sp[0], 100) < 0 || dup2(sp[1], 101) < 0) e2e_fail("dup2: %s", strerror(errno));
    close(sp[0]);
    close(sp[1]);
    if (dup2(100, 3) != 3 || dup2(101, 4) != 4) e2e_fail("dup2: %s", strerror(errno));
    close(100);
    close(101);
    int passed = open("/dev/null", O_RDONLY);
    char byte = 'x';
    struct iovec iov = {&byte, 1};
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &passed, sizeof passed);
    if (sendmsg(4, &mh, 0) != 1) e2e_fail("sendmsg: %s", strerror(errno));
    close(passed);
  } else if (strcmp(mode, "shared-pipe") == 0) {
    int p[2];
    if (pipe(p) != 0) e2e_fail("pipe: %s", strerror(errno));
    // The child is the target (a process with a child is refused for that
    // reason first): it reads fd 3, its parent holds the write end.
    pid_t kid = fork();
    if (kid < 0) e2e_fail("fork: %s", strerror(errno));
    if (kid > 0) {
      close(p[0]);
      int st = 0;
      waitpid(kid, &st, 0);
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
    e2e_pid = getpid();
    close(p[1]);
    if (p[0] != 3 && (dup2(p[0], 3) != 3 || close(p[0]))) e2e_fail("dup2: %s", strerror(errno));
  } else if (strcmp(mode, "shared-fifo") == 0) {
    // READY.fifo, which the driver holds open too.
    char path[4096];
    snprintf(path, sizeof path, "%s.fifo", argv[1]);
    int f = open(path, O_RDONLY | O_NONBLOCK);
    if (f < 0) e2e_fail("open %s: %s", path, strerror(errno));
    if (f != 3 && (dup2(f, 3) != 3 || close(f))) e2e_fail("dup2: %s", strerror(errno));
  } else if (strcmp(mode, "lease") == 0) {
    char path[4096];
    snprintf(path, sizeof path, "%s.lease", argv[1]);
    int w = open(path, O_WRONLY | O_CREAT, 0600);
    if (w < 0 || close(w) != 0) e2e_fail("create %s: %s", path, strerror(errno));
    int l = open(path, O_RDONLY);  // a read lease needs a file no one has open for writing
    if (l < 0 || fcntl(l, F_SETLEASE, F_RDLCK) != 0)
      e2e_fail("F_SETLEASE %s: %s", path, strerror(errno));
    if (l != 3 && (dup2(l, 3) != 3 || close(l))) e2e_fail("dup2: %s", strerror(errno));
  } else if (strcmp(mode, "pidfd") == 0) {
    int p = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (p < 0) e2e_fail("pidfd_open: %s", strerror(errno));
    if (p != 3 && (dup2(p, 3) != 3 || close(p))) e2e_fail("dup2: %s", strerror(errno));
  } else if (strcmp(mode, "inotify-unlinked") == 0) {
    char path[4200];
    snprintf(path, sizeof path, "%s.watched", argv[1]);
    int f = open(path, O_RDWR | O_CREAT, 0600);
    int i = inotify_init1(0);
    if (f < 0 || i < 0) e2e_fail("open, inotify_init1: %s", strerror(errno));
    if (inotify_add_watch(i, path, IN_MODIFY) != 1)
      e2e_fail("inotify_add_watch: %s", strerror(errno));
    if (unlink(path) != 0) e2e_fail("unlink: %s", strerror(errno));
    // Out of the way first, so that placing one does not close the other.
    int hi = fcntl(i, F_DUPFD, 100), hf = fcntl(f, F_DUPFD, 100);
    if (hi < 0 || hf < 0 || close(i) || close(f) || dup2(hi, 3) != 3 || dup2(hf, 4) != 4 ||
        close(hi) || close(hf))
      e2e_fail("placing the fds: %s", strerror(errno));
  } else if (strcmp(mode, "udp-multicast") == 0) {
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct ip_mreqn m = {.imr_ifindex = 1};  // lo
    inet_pton(AF_INET, "239.1.2.3", &m.imr_multiaddr);
    if (u < 0 || setsockopt(u, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0)
      e2e_fail("IP_ADD_MEMBERSHIP: %s", strerror(errno));
    if (u != 3 && (dup2(u, 3) != 3 || close(u))) e2e_fail("dup2: %s", strerror(errno));
  } else if (strcmp(mode, "udp-peeked-empty") == 0) {
    int u = socket(AF_INET, SOCK_DGRAM, 0), s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    char b[4];
    if (u < 0 || s < 0 || bind(u, (struct sockaddr*)&a, sizeof a) ||
        getsockname(u, (struct sockaddr*)&a, &len) ||
        sendto(s, b, 0, 0, (struct sockaddr*)&a, sizeof a) != 0 ||
        recv(u, b, sizeof b, MSG_PEEK) != 0)
      e2e_fail("an empty datagram: %s", strerror(errno));
    close(s);
    if (u != 3 && (dup2(u, 3) != 3 || close(u))) e2e_fail("dup2: %s", strerror(errno));
  } else if (strcmp(mode, "secretmem") == 0 || strcmp(mode, "secretmem-mapped") == 0) {
    int m = (int)syscall(SYS_memfd_secret, 0);
    if (m < 0 && (errno == ENOSYS || errno == EINVAL)) {
      printf("no memfd_secret on this kernel\n");
      return 77;
    }
    char* p = MAP_FAILED;
    if (m < 0 || ftruncate(m, 4096) != 0 ||
        (p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0)) == MAP_FAILED)
      e2e_fail("memfd_secret: %s", strerror(errno));
    strcpy(p, "secret");
    if (strcmp(mode, "secretmem-mapped") == 0) {
      close(m);  // only the mapping is left; fd 3 holds /dev/null
      m = open("/dev/null", O_RDONLY);
    }
    if (m != 3 && (dup2(m, 3) != 3 || close(m))) e2e_fail("dup2: %s", strerror(errno));
  } else if (strcmp(mode, "pty-stopped") == 0) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) || unlockpt(m)) e2e_fail("posix_openpt: %s", strerror(errno));
    int sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (sl < 0 || dup2(m, 100) < 0 || dup2(sl, 101) < 0) e2e_fail("pty: %s", strerror(errno));
    close(m);
    close(sl);
    if (dup2(100, 3) != 3 || dup2(101, 4) != 4) e2e_fail("dup2: %s", strerror(errno));
    close(100);
    close(101);
    if (write(3, "typed\n", 6) != 6 || tcflow(4, TCOOFF) != 0) e2e_fail("pty: %s", strerror(errno));
  } else if (strcmp(mode, "pty-session") == 0) {
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) || unlockpt(m)) e2e_fail("posix_openpt: %s", strerror(errno));
    int gate[2];
    if (pipe(gate) != 0) e2e_fail("pipe: %s", strerror(errno));
    pid_t kid = fork();  // the child is the target; its parent leads the session
    if (kid < 0) e2e_fail("fork: %s", strerror(errno));
    if (kid > 0) {
      int sl = -1;
      signal(SIGHUP, SIG_IGN);  // the hangup when the child's master closes
      if (setsid() < 0 || (sl = open(ptsname(m), O_RDWR)) < 0 || ioctl(sl, TIOCSCTTY, 0) != 0)
        e2e_fail("taking the pty as controlling terminal: %s", strerror(errno));
      close(sl);
      close(m);
      close(gate[0]);
      close(gate[1]);  // the child may go on
      int st = 0;
      waitpid(kid, &st, 0);
      _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
    }
    e2e_pid = getpid();
    close(gate[1]);
    char c;
    if (read(gate[0], &c, 1) != 0) e2e_fail("waiting for the parent");
    close(gate[0]);
    if (m != 3 && (dup2(m, 3) != 3 || close(m))) e2e_fail("dup2: %s", strerror(errno));
  } else {
    e2e_fail("unknown mode %s", mode);
  }
  e2e_ready(argv[1]);
  e2e_sleep_ms(3000);
  if (fcntl(3, F_GETFD) < 0) e2e_fail("fd 3 is gone");
  if (strcmp(mode, "unix-inflight") == 0) {
    // The refused checkpoint peeked at the queue: the byte and the
    // descriptor must still be there, once.
    char byte = 0;
    struct iovec iov = {&byte, 1};
    union {
      char buf[CMSG_SPACE(sizeof(int))];
      struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    if (recvmsg(3, &mh, MSG_DONTWAIT) != 1 || byte != 'x') e2e_fail("the queued byte is gone");
    struct cmsghdr* c = CMSG_FIRSTHDR(&mh);
    if (!c || c->cmsg_type != SCM_RIGHTS) e2e_fail("the descriptor in flight is gone");
    int got;
    memcpy(&got, CMSG_DATA(c), sizeof got);
    close(got);
    if (recv(3, &byte, 1, MSG_DONTWAIT) != -1 || errno != EAGAIN) e2e_fail("more data than sent");
  }
  if (strcmp(mode, "pty-stopped") == 0) {
    char b[16];
    if (write(4, "x", 1) != -1 || errno != EAGAIN)
      e2e_fail("the pty's output is no longer stopped");
    if (read(4, b, sizeof b) != 6 || memcmp(b, "typed\n", 6) != 0)
      e2e_fail("the pty's input is gone");
  }
  if (strcmp(mode, "udp-peeked-empty") == 0) {
    char b[4];
    if (recv(3, b, sizeof b, MSG_DONTWAIT) != 0) e2e_fail("the empty datagram is gone");
    if (recv(3, b, sizeof b, MSG_DONTWAIT) != -1 || errno != EAGAIN) e2e_fail("more datagrams");
  }
  e2e_done();
}
