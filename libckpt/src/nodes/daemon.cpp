// The per-node agent service (daemon.hpp).
#include "nodes/daemon.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "image/store.hpp"
#include "migrate/protocol.hpp"
#include "nodes/lock_journal.hpp"
#include "nodes/move.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"

namespace ckpt::nodes {

namespace {

Result<UniqueFd> listen_on(const std::string& where) {
  std::string host, port;
  CKPT_TRY(migrate::split_host_port(where, &host, &port));
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int e = ::getaddrinfo(host == "*" ? nullptr : host.c_str(), port.c_str(), &hints, &res);
      e != 0)
    return make_error(EINVAL, "resolving " + where + ": " + gai_strerror(e));
  Error last = make_error(EADDRNOTAVAIL, "cannot listen on " + where);
  for (addrinfo* a = res; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) continue;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 16) == 0) {
      ::freeaddrinfo(res);
      return fd;
    }
    last = sys_error("listening on " + where);
  }
  ::freeaddrinfo(res);
  return last;
}

}  // namespace

Result<std::unique_ptr<Daemon>> Daemon::open(const DaemonOptions& opts) {
  std::unique_ptr<Daemon> d(new Daemon(opts));
  d->cfg_.dir = opts.dir;
  d->cfg_.timeout = opts.timeout;
  d->cfg_.token_file = opts.token_file;
  d->cfg_.log = opts.log;
  CKPT_ASSIGN(d->cfg_.token, migrate::load_token(opts.token_file));
  CKPT_TRY(image::ensure_dir(opts.dir));
  d->clean_after_sessions();  // a daemon killed with its sessions
  CKPT_ASSIGN(d->listener_, listen_on(opts.listen));
  d->next_sweep_ = now_seconds() + 2;
  return d;
}

void Daemon::note(const std::string& line) const {
  if (opts_.log) opts_.log(LogKind::note, line);
}

// What dead sessions left: the connection locks of a session killed in the
// middle of a round (the kernel released the processes it had frozen), and
// its generation's .tmp- directory.
void Daemon::clean_after_sessions() {
  const std::string& dir = opts_.dir;
  if (int n = sweep_dead_sessions(dir, opts_.timeout); n > 0)
    note("removed " + std::to_string(n) + " connection lock(s) left by a dead session");
  image::remove_stale_temps(dir);
  // A destination session's staging directory, .incoming-PID-XXXXXX.
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> dead;
    while (dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, ".incoming-", 10) != 0) continue;
      const int pid = std::atoi(e->d_name + 10);
      if (pid > 0 && !session_alive(pid)) dead.push_back(dir + "/" + e->d_name);
    }
    ::closedir(d);
    for (const std::string& t : dead) remove_tree(t);
  }
}

void Daemon::reap() {
  int st = 0;
  for (pid_t p; (p = ::waitpid(-1, &st, WNOHANG)) > 0;) {
    if (sessions_.erase(p)) {
      if (WIFSIGNALED(st)) {
        note("session " + std::to_string(p) + " killed by signal " + std::to_string(WTERMSIG(st)));
        clean_after_sessions();
      }
      continue;
    }
    if (WIFSIGNALED(st))
      note("process " + std::to_string(p) + " ended by signal " + std::to_string(WTERMSIG(st)));
    else
      note("process " + std::to_string(p) + " exited with " + std::to_string(WEXITSTATUS(st)));
  }
}

Status Daemon::step(int wait_ms) {
  reap();
  // Also now and then: a session killed together with a previous daemon
  // may have been a zombie (not yet reaped by its new parent) at start.
  if (const double t = now_seconds(); t >= next_sweep_) {
    clean_after_sessions();
    next_sweep_ = t + 2;
  }
  pollfd pfd{listener_.get(), POLLIN, 0};
  if (::poll(&pfd, 1, wait_ms) <= 0) return {};
  UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn.valid()) return {};
  const pid_t child = ::fork();
  if (child < 0) return sys_error("fork");
  if (child == 0) {
    listener_.reset();
    journal_locks(opts_.dir);
    Status s = serve_session(conn.get(), cfg_);
    close_journal();
    if (!s.ok()) note("session: " + s.error().message);
    ::_exit(s.ok() ? 0 : 1);
  }
  sessions_.insert(child);
  return {};
}

}  // namespace ckpt::nodes
