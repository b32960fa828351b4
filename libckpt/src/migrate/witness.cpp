#include "migrate/witness.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "migrate/gate.hpp"
#include "migrate/protocol.hpp"
#include "util/clock.hpp"

namespace ckpt::migrate {

namespace {

// Messages from the sender (SOCK_SEQPACKET): 'A' u64 generation + n x i32
// leader PIDs (armed), 'D' (disarmed), 'Q' (go: the sender lives on).

[[noreturn]] void witness_main(int ctl, int conn, const std::atomic<uint32_t>* flag) {
  // Terminal and hang-up signals reach the whole process group: the
  // witness outlives them, since what they kill is what it is here for.
  for (int sig : {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGPIPE}) ::signal(sig, SIG_IGN);
  uint64_t generation = 0;
  std::vector<UniqueFd> sources;  // pidfds, opened while the sender holds them frozen
  for (;;) {
    uint8_t buf[4096];
    const ssize_t n = ::recv(ctl, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the sender is gone
    if (buf[0] == 'Q') ::_exit(0);
    if (buf[0] == 'D') {
      generation = 0;
      sources.clear();
    } else if (buf[0] == 'A' && n >= 9 && (n - 9) % 4 == 0) {
      generation = get_u64(buf + 1);
      sources.clear();
      for (ssize_t i = 9; i < n; i += 4)
        sources.emplace_back(int(::syscall(SYS_pidfd_open, pid_t(get_u32(buf + i)), 0)));
    }
  }
  if (!generation) ::_exit(0);  // not armed: COMMIT was never sent
  for (const UniqueFd& s : sources)
    if (s.valid()) (void)::syscall(SYS_pidfd_send_signal, s.get(), SIGKILL, nullptr, 0);
  // COMMIT if it did not go out, then DONE at once: the sources are gone,
  // which is all DONE says. Not after RUNNING: the dead sender may have read
  // that frame already (it wakes to its SIGKILL with the frame in hand).
  FrameWriter w(conn);
  std::vector<uint8_t> p;
  put_u64(p, generation);
  if (!flag->load(std::memory_order_acquire) && !w.send(kCommit, p.data(), p.size()).ok())
    ::_exit(1);
  if (!w.send(kDone, nullptr, 0).ok()) ::_exit(1);
  // Then wait (bounded) for the receiver to close its end, reading what it
  // sends: closing with its frames unread would reset the connection.
  ::shutdown(conn, SHUT_WR);
  const double deadline = now_seconds() + 60;
  for (char sink[4096]; now_seconds() < deadline;) {
    pollfd pfd{conn, POLLIN, 0};
    if (::poll(&pfd, 1, 1000) < 0 && errno != EINTR) break;
    if (!pfd.revents) continue;
    const ssize_t n = ::recv(conn, sink, sizeof sink, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
  }
  ::_exit(0);
}

}  // namespace

Result<std::unique_ptr<CommitWitness>> CommitWitness::start(int conn) {
  std::unique_ptr<CommitWitness> cw(new CommitWitness);
  void* shared = ::mmap(nullptr, sizeof(std::atomic<uint32_t>), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return sys_error("mmap");
  cw->flag_ = new (shared) std::atomic<uint32_t>(0);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return sys_error("socketpair");
  UniqueFd mine(sv[0]), theirs(sv[1]);
  cw->pid_ = ::fork();
  if (cw->pid_ < 0) return sys_error("fork");
  if (cw->pid_ == 0) {
    // Nothing to say, and a caller reading the tool's output must see it
    // end with the tool.
    if (int null = ::open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0)
      for (int fd = 0; fd < 3; ++fd) ::dup2(null, fd);
    close_fds_except(theirs.get(), conn);
    witness_main(theirs.get(), conn, cw->flag_);
  }
  cw->ctl_ = std::move(mine);
  return cw;
}

Status CommitWitness::arm(uint64_t generation, const std::vector<pid_t>& leaders) {
  std::vector<uint8_t> m{uint8_t('A')};
  put_u64(m, generation);
  for (pid_t p : leaders) put_u32(m, uint32_t(p));
  if (m.size() > 4096) return make_error(E2BIG, "too many processes for the commit witness");
  if (::send(ctl_.get(), m.data(), m.size(), MSG_NOSIGNAL) != ssize_t(m.size()))
    return sys_error("arming the commit witness");
  return {};
}

void CommitWitness::say(char what) {
  (void)::send(ctl_.get(), &what, 1, MSG_NOSIGNAL);
}

CommitWitness::~CommitWitness() {
  if (pid_ > 0) {
    say('Q');
    ctl_.reset();
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (flag_) ::munmap(flag_, sizeof(std::atomic<uint32_t>));
}

}  // namespace ckpt::migrate
