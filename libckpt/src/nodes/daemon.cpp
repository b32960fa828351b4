// cr_noded's loop (daemon.hpp).
#include "nodes/daemon.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
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

volatile sig_atomic_t g_stop = 0;
void on_stop(int) {
  g_stop = 1;
}

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

namespace {

// What dead sessions left: the connection locks of a session killed in the
// middle of a round (the kernel released the processes it had frozen), and
// its generation's .tmp- directory.
void clean_after_sessions(const std::string& dir, double grace) {
  if (int n = sweep_dead_sessions(dir, grace); n > 0)
    std::fprintf(stderr, "cr_noded: removed %d connection lock(s) left by a dead session\n", n);
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

}  // namespace

Status run_daemon(const DaemonOptions& opts) {
  AgentConfig cfg;
  cfg.dir = opts.dir;
  cfg.timeout = opts.timeout;
  cfg.token_file = opts.token_file;
  CKPT_ASSIGN(cfg.token, migrate::load_token(opts.token_file));
  CKPT_TRY(image::ensure_dir(opts.dir));
  clean_after_sessions(opts.dir, opts.timeout);  // a daemon killed with its sessions
  CKPT_ASSIGN(UniqueFd lfd, listen_on(opts.listen));
  // Restored jobs outlive the session that built them: they become ours.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return sys_error("PR_SET_CHILD_SUBREAPER");
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  std::fprintf(stderr, "cr_noded: listening on %s, checkpoints in %s\n", opts.listen.c_str(),
               opts.dir.c_str());
  std::set<pid_t> sessions;
  double next_sweep = now_seconds() + 2;
  while (!g_stop) {
    int st = 0;
    for (pid_t p; (p = ::waitpid(-1, &st, WNOHANG)) > 0;) {
      if (sessions.erase(p)) {
        if (WIFSIGNALED(st)) {
          std::fprintf(stderr, "cr_noded: session %d killed by signal %d\n", p, WTERMSIG(st));
          clean_after_sessions(opts.dir, opts.timeout);
        }
        continue;
      }
      if (WIFSIGNALED(st))
        std::fprintf(stderr, "cr_noded: process %d ended by signal %d\n", p, WTERMSIG(st));
      else
        std::fprintf(stderr, "cr_noded: process %d exited with %d\n", p, WEXITSTATUS(st));
    }
    // Also now and then: a session killed together with a previous daemon
    // may have been a zombie (not yet reaped by its new parent) at start.
    if (const double t = now_seconds(); t >= next_sweep) {
      clean_after_sessions(opts.dir, opts.timeout);
      next_sweep = t + 2;
    }
    pollfd pfd{lfd.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 200) <= 0) continue;
    UniqueFd conn(::accept4(lfd.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    const pid_t child = ::fork();
    if (child < 0) return sys_error("fork");
    if (child == 0) {
      lfd.reset();
      journal_locks(opts.dir);
      Status s = serve_session(conn.get(), cfg);
      close_journal();
      if (!s.ok()) std::fprintf(stderr, "cr_noded: session: %s\n", s.error().message.c_str());
      ::_exit(s.ok() ? 0 : 1);
    }
    sessions.insert(child);
  }
  return {};
}

}  // namespace ckpt::nodes
