// cr_recv: the receiving side. The listening process (the "monitor")
// accepts connections as they come; each is authenticated by a gatekeeper
// process of its own (migrate/gate: sandboxed, within a short deadline,
// under caps per source and in all), so no client without the token can hold
// up one that has it. An authenticated connection gets a session handler,
// forked with a seccomp allowlist and (where the kernel has it) Landlock
// confining it to its staging directory, which reads and checks every frame
// and writes the generations there. Only when the whole stream arrived,
// every generation committed there and opened cleanly, does the handler
// tell the monitor, which restores the process (restore_process verifies
// every page run before the process runs). The restore is not done under
// the allowlist because a seccomp filter is inherited by every child: the
// restored process would run under it.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ckpt/migrate.hpp>

#include "image/store.hpp"
#include "migrate/gate.hpp"
#include "migrate/monitor.hpp"
#include "migrate/protocol.hpp"
#include "migrate/staging.hpp"

namespace ckpt {

using namespace migrate;

Result<std::unique_ptr<Receiver>> Receiver::open(const ReceiveOptions& opts) {
  std::unique_ptr<Receiver> rc(new Receiver);
  rc->opts_ = opts;
  CKPT_ASSIGN(rc->token_, load_token(opts.token_file));
  if (!opts.dir.empty()) CKPT_TRY(image::ensure_dir(opts.dir));
  remove_stale_staging();
  std::string host, port;
  CKPT_TRY(split_host_port(opts.listen, &host, &port));
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int e = ::getaddrinfo(host == "*" ? nullptr : host.c_str(), port.c_str(), &hints, &res);
      e != 0)
    return make_error(EINVAL, "resolving " + opts.listen + ": " + gai_strerror(e));
  Error last = make_error(EADDRNOTAVAIL, "cannot listen on " + opts.listen);
  for (addrinfo* a = res; a && rc->listen_fd_ < 0; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) continue;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 256) != 0 ||
        ::fcntl(fd.get(), F_SETFL, O_NONBLOCK) != 0) {
      last = sys_error("listening on " + opts.listen);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t sl = sizeof ss;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &sl);
    rc->port_ = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);  // same offset for v6
    rc->listen_fd_ = fd.release();
  }
  ::freeaddrinfo(res);
  if (rc->listen_fd_ < 0) return last;
  // OpenSSL reads its configuration on first use: done here, before any
  // gatekeeper is forked under a filter that allows no file.
  uint8_t zero[kNonceSize] = {};
  if (auto warm = hmac(rc->token_, "warm-up", zero, zero); !warm.ok()) return warm.error();
  GateLimits limits;
  limits.handshake_seconds = opts.handshake_seconds;
  limits.max_pending = opts.max_pending;
  limits.max_per_source = opts.max_per_source;
  limits.sandbox = opts.sandbox;
  rc->gate_ = std::make_unique<Gate>(rc->listen_fd_, rc->token_, limits, opts.on_refused);
  return rc;
}

Receiver::~Receiver() {
  gate_.reset();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Result<ReceivedProcess> Receiver::serve_one() {
  CKPT_ASSIGN(AuthenticatedConnection authed, gate_->next());
  return migrate::serve_connection(opts_, listen_fd_, std::move(authed));
}

}  // namespace ckpt
