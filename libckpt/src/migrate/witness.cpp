#include "migrate/witness.hpp"

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

namespace ckpt::migrate {

namespace {

// Messages from the sender (SOCK_SEQPACKET): 'A' u64 generation + n x i32
// leader PIDs (armed), 'D' (disarmed), 'R' (RUNNING came), 'Q' (go: the
// sender lives on).

[[noreturn]] void witness_main(int ctl, int conn, const std::atomic<uint32_t>* flag) {
  // Terminal and hang-up signals reach the whole process group: the
  // witness outlives them, since what they kill is what it is here for.
  for (int sig : {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGPIPE}) ::signal(sig, SIG_IGN);
  uint64_t generation = 0;
  bool running_there = false;
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
    } else if (buf[0] == 'R') {
      running_there = true;
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
  FrameWriter w(conn);
  if (!running_there) {
    if (!flag->load(std::memory_order_acquire)) {
      uint8_t p[8];
      for (int i = 0; i < 8; ++i) p[i] = uint8_t(generation >> (8 * i));
      if (!w.send(kCommit, p, sizeof p).ok()) ::_exit(1);
    }
    // Read up to RUNNING, so that the receiver's session ends as after any
    // migration (closing with its frames unread would reset it).
    FrameReader r(conn);
    for (;;) {
      auto f = r.next();
      if (!f.ok() || f->type == kError) ::_exit(1);
      if (f->type == kRunning) break;
    }
  }
  ::_exit(w.send(kDone, nullptr, 0).ok() ? 0 : 1);
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
