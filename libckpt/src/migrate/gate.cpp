#include "migrate/gate.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#include "migrate/handshake.hpp"
#include "migrate/sandbox.hpp"
#include "util/clock.hpp"

namespace ckpt::migrate {

namespace {

int pidfd_open(pid_t pid) {
  return int(::syscall(SYS_pidfd_open, pid, 0));
}

std::string describe_death(const siginfo_t& si) {
  if (si.si_code == CLD_EXITED)
    return "the handshake handler exited with " + std::to_string(si.si_status);
  if (si.si_status == SIGSYS)
    return "the handshake handler made a system call outside its seccomp allowlist";
  return "the handshake handler died (signal " + std::to_string(si.si_status) + ")";
}

}  // namespace

void close_fds_except(int a, int b) {
  if (a > b) std::swap(a, b);
  if (a > 3) ::syscall(SYS_close_range, 3u, unsigned(a - 1), 0u);
  if (b > a + 1) ::syscall(SYS_close_range, unsigned(a + 1), unsigned(b - 1), 0u);
  ::syscall(SYS_close_range, unsigned(b + 1), ~0u, 0u);
}

Gate::Gate(int listen_fd, const std::vector<uint8_t>& token, GateLimits limits,
           std::function<void(const std::string&, const std::string&)> refused)
    : listen_fd_(listen_fd),
      token_(token),
      limits_(limits),
      refused_(std::move(refused)),
      admission_(limits.max_pending, limits.max_per_source) {}

Gate::~Gate() {
  for (auto& [id, p] : pending_) finish(p);
}

void Gate::finish(Pending& p) {
  if (!p.pidfd.valid()) return;
  (void)::syscall(SYS_pidfd_send_signal, p.pidfd.get(), SIGKILL, nullptr, 0);
  siginfo_t si{};
  while (::waitid(P_PIDFD, id_t(p.pidfd.get()), &si, WEXITED) < 0 && errno == EINTR) {
  }
  p.pidfd.reset();
}

void Gate::drop(uint64_t id, const std::string& why) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  finish(it->second);
  if (refused_) refused_(it->second.peer, why);
  admission_.remove(id);
  pending_.erase(it);  // closes the connection
}

Status Gate::start_gatekeeper(uint64_t, Pending& p) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe");
  UniqueFd rd(fds[0]), wr(fds[1]);
  const pid_t parent = ::getpid();
  const double deadline = p.deadline;
  pid_t pid = ::fork();
  if (pid < 0) return sys_error("fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    close_fds_except(p.conn.get(), wr.get());
    std::string msg;
    Status st = limits_.sandbox ? apply_gate_sandbox() : Status{};
    Result<Mac> proof = st.ok() ? accept_sender(p.conn.get(), token_, deadline) : st.error();
    if (proof.ok()) {
      msg = "A";
      msg.append(reinterpret_cast<const char*>(proof->data()), proof->size());
    } else {
      msg = "E" + proof.error().message;
    }
    (void)::write(wr.get(), msg.data(), std::min<size_t>(msg.size(), 4000));
    ::_exit(proof.ok() ? 0 : 1);
  }
  p.pidfd.reset(pidfd_open(pid));
  if (!p.pidfd.valid()) {  // cannot happen before anyone reaps it; kill it by PID then
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return sys_error("pidfd_open");
  }
  (void)::fcntl(rd.get(), F_SETFL, O_NONBLOCK);
  p.report = std::move(rd);
  return {};
}

void Gate::accept_ready() {
  for (int n = 0; n < 256; ++n) {
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    int c = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &sl, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK && refused_)
        refused_("(listening socket)", std::string("accept: ") + std::strerror(errno));
      return;
    }
    Pending p;
    p.conn.reset(c);
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    ::getnameinfo(reinterpret_cast<const sockaddr*>(&ss), sl, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV);
    p.source = host;
    p.peer = std::string(host) + ":" + serv;
    p.deadline = now_seconds() + limits_.handshake_seconds;
    const uint64_t id = next_id_++;
    const bool source_full = admission_.from(p.source) >= limits_.max_per_source;
    for (uint64_t victim : admission_.admit(id, p.source))
      drop(victim, source_full
                       ? "dropped unauthenticated: " + std::to_string(limits_.max_per_source) +
                             " newer connections from " + p.source +
                             " wait for authentication (--max-per-source)"
                       : "dropped unauthenticated: " + std::to_string(limits_.max_pending) +
                             " connections wait for authentication (--max-pending)");
    if (Status st = start_gatekeeper(id, p); !st.ok()) {
      admission_.remove(id);
      if (refused_) refused_(p.peer, st.error().message);
      continue;
    }
    pending_.emplace(id, std::move(p));
  }
}

void Gate::on_report(uint64_t id) {
  Pending& p = pending_.at(id);
  char buf[4096];
  ssize_t n;
  do n = ::read(p.report.get(), buf, sizeof buf);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN) return;
  if (n == 1 + ssize_t(kMacSize) && buf[0] == 'A') {
    AuthenticatedConnection a;
    std::memcpy(a.proof.data(), buf + 1, kMacSize);
    if (ready_.size() >= limits_.max_ready) {
      drop(id, "authenticated, but " + std::to_string(limits_.max_ready) +
                   " authenticated senders already wait for their turn");
      return;
    }
    finish(p);
    a.conn = std::move(p.conn);
    a.peer = p.peer;
    admission_.remove(id);
    pending_.erase(id);
    ready_.push_back(std::move(a));
    return;
  }
  if (n > 1 && buf[0] == 'E') {
    drop(id, std::string(buf + 1, size_t(n - 1)));
    return;
  }
  // No report: the gatekeeper died.
  siginfo_t si{};
  (void)::syscall(SYS_pidfd_send_signal, p.pidfd.get(), SIGKILL, nullptr, 0);
  int w;
  while ((w = ::waitid(P_PIDFD, id_t(p.pidfd.get()), &si, WEXITED)) < 0 && errno == EINTR) {
  }
  p.pidfd.reset();
  drop(id, w == 0 ? describe_death(si) : "the handshake handler ended without a report");
}

Result<AuthenticatedConnection> Gate::next() {
  for (;;) {
    if (!ready_.empty()) {
      AuthenticatedConnection a = std::move(ready_.front());
      ready_.pop_front();
      return a;
    }
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    std::vector<uint64_t> ids;
    double soonest = -1;
    for (auto& [id, p] : pending_) {
      fds.push_back({p.report.get(), POLLIN, 0});
      ids.push_back(id);
      if (soonest < 0 || p.deadline < soonest) soonest = p.deadline;
    }
    int timeout = -1;
    if (soonest >= 0) timeout = int(std::ceil(std::max(0.0, soonest - now_seconds()) * 1000)) + 1;
    int r = ::poll(fds.data(), fds.size(), timeout);
    if (r < 0 && errno != EINTR) return sys_error("waiting for connections");
    for (size_t i = 1; r > 0 && i < fds.size(); ++i)
      if (fds[i].revents) on_report(ids[i - 1]);
    const double now = now_seconds();
    std::vector<uint64_t> late;
    for (auto& [id, p] : pending_)
      if (p.deadline <= now) late.push_back(id);
    for (uint64_t id : late) {
      char s[128];
      std::snprintf(s, sizeof s,
                    "no authentication within the deadline of %g s (--handshake-timeout)",
                    limits_.handshake_seconds);
      drop(id, s);
    }
    if (r > 0 && (fds[0].revents & POLLIN)) accept_ready();
  }
}

}  // namespace ckpt::migrate
