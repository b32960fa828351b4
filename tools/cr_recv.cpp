// cr_recv --listen ADDR:PORT --token FILE [--once] [--dir DIR]: receive
// migrated processes and restore them on this node.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ckpt/migrate.hpp>
#include <cstdio>

#include "common/cli.hpp"

namespace {

// Until a migration is restored, a termination signal ends the receiver
// (as its default action would, also where that action does not apply: as
// the first process of a PID namespace); half-built processes die with it
// (they are its children, killed with their tracer).
void end_now(int sig) {
  ::_exit(128 + sig);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Receive migrated processes (from cr_migrate) and restore them here. The sender\n"
      "must prove it knows the token; every frame is checked and nothing is restored\n"
      "unless the whole stream arrived intact. Connections are authenticated all at\n"
      "once, each within --handshake-timeout; failed ones are reported and the\n"
      "receiver goes on. With --once: once one migration has been restored, wait for\n"
      "the restored process and exit with its status (as cr_restart does)."};
  ckpt::ReceiveOptions opts;
  bool once = false, json = false, no_sandbox = false;
  app.add_option("--listen", opts.listen, "address to listen on, ADDR:PORT (* for any)")
      ->required();
  app.add_option("--token", opts.token_file, "shared token file (owner-only)")->required();
  app.add_flag("--once", once,
               "after the first successful migration, wait for the process and exit with its "
               "status (failed attempts before it are reported and do not end the receiver)");
  app.add_option("--dir", opts.dir, "also keep the received chain as checkpoints in DIR");
  app.add_flag("--new-pid", opts.new_pid, "use a new PID if the original one is taken here");
  app.add_option("--timeout", opts.timeout_seconds,
                 "I/O timeout of an authenticated connection, seconds");
  app.add_option("--handshake-timeout", opts.handshake_seconds,
                 "a connection must authenticate within this many seconds (default 5)");
  app.add_option("--max-pending", opts.max_pending,
                 "connections waiting for authentication at most (default 128; the oldest of "
                 "the address holding the most goes to make room)");
  app.add_option("--max-per-source", opts.max_per_source,
                 "of those, from one address at most (default 16; its oldest goes)");
  app.add_flag("--no-sandbox", no_sandbox, "do not apply the seccomp allowlist (debugging)");
  bool cold = false;
  app.add_flag("--cold", cold,
               "restore only once the stream is complete (default: build the process while "
               "generations arrive)");
  app.add_flag("--json", json, "print one JSON line per received process on stdout");
  ckpt::cli::add_trace_option(app, opts.log, "cr_recv");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  opts.sandbox = !no_sandbox;
  opts.on_refused = [](const std::string& peer, const std::string& why) {
    std::fprintf(stderr, "cr_recv: %s: %s\n", peer.c_str(), why.c_str());
  };
  opts.warm = !cold;

  struct sigaction end {};
  end.sa_handler = end_now;
  for (int sig : {SIGTERM, SIGHUP, SIGINT}) ::sigaction(sig, &end, nullptr);
  auto rc = ckpt::Receiver::open(opts);
  if (!rc.ok()) return ckpt::cli::fail("cr_recv", rc.error());
  std::unique_ptr<ckpt::Receiver> recv = std::move(*rc);
  for (;;) {
    auto r = recv->serve_one();
    // Restored processes that ended meanwhile (not --once): reap them.
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (!r.ok()) {
      // Even with --once: a failed migration is not the one it waits for.
      std::fprintf(stderr, "cr_recv: %s\n", r.error().message.c_str());
      continue;
    }
    if (!r->warning.empty()) std::fprintf(stderr, "cr_recv: %s\n", r->warning.c_str());
    if (json) {
      ckpt::cli::print_json({{"pid", r->pid},
                             {"peer", r->peer},
                             {"generations", r->generations},
                             {"bytes", r->bytes},
                             {"seconds", r->seconds},
                             {"restore_seconds", r->restore_seconds},
                             {"build", r->build}});
    }
    if (once) {
      // Done listening: connections still at the gate are closed now.
      recv.reset();
      std::fflush(stdout);
      return ckpt::cli::wait_child(r->pid);
    }
  }
}
