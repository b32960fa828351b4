// cr_noded's loop (daemon.hpp).
#include "nodes/daemon.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "image/store.hpp"
#include "migrate/protocol.hpp"
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

Status run_daemon(const DaemonOptions& opts) {
  AgentConfig cfg;
  cfg.dir = opts.dir;
  cfg.timeout = opts.timeout;
  cfg.token_file = opts.token_file;
  CKPT_ASSIGN(cfg.token, migrate::load_token(opts.token_file));
  CKPT_TRY(image::ensure_dir(opts.dir));
  CKPT_ASSIGN(UniqueFd lfd, listen_on(opts.listen));
  // Restored jobs outlive the session that built them: they become ours.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return sys_error("PR_SET_CHILD_SUBREAPER");
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  std::fprintf(stderr, "cr_noded: listening on %s, checkpoints in %s\n", opts.listen.c_str(),
               opts.dir.c_str());
  while (!g_stop) {
    int st = 0;
    for (pid_t p; (p = ::waitpid(-1, &st, WNOHANG)) > 0;) {
      if (WIFSIGNALED(st))
        std::fprintf(stderr, "cr_noded: process %d ended by signal %d\n", p, WTERMSIG(st));
      else
        std::fprintf(stderr, "cr_noded: process %d exited with %d\n", p, WEXITSTATUS(st));
    }
    pollfd pfd{lfd.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 200) <= 0) continue;
    UniqueFd conn(::accept4(lfd.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    const pid_t child = ::fork();
    if (child < 0) return sys_error("fork");
    if (child == 0) {
      lfd.reset();
      Status s = serve_session(conn.get(), cfg);
      if (!s.ok()) std::fprintf(stderr, "cr_noded: session: %s\n", s.error().message.c_str());
      ::_exit(s.ok() ? 0 : 1);
    }
  }
  return {};
}

}  // namespace ckpt::nodes
