// cr_recv --listen ADDR:PORT --token FILE [--once] [--dir DIR]: receive
// migrated processes and restore them on this node.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ckpt/migrate.hpp>
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Receive migrated processes (from cr_migrate) and restore them here. The sender\n"
      "must prove it knows the token; every frame is checked and nothing is restored\n"
      "unless the whole stream arrived intact. With --once: serve one migration, then\n"
      "wait for the restored process and exit with its status (as cr_restart does)."};
  ckpt::ReceiveOptions opts;
  bool once = false, json = false, no_sandbox = false;
  app.add_option("--listen", opts.listen, "address to listen on, ADDR:PORT (* for any)")
      ->required();
  app.add_option("--token", opts.token_file, "shared token file (owner-only)")->required();
  app.add_flag("--once", once, "serve one migration, then wait for the process");
  app.add_option("--dir", opts.dir, "also keep the received chain as checkpoints in DIR");
  app.add_flag("--new-pid", opts.new_pid, "use a new PID if the original one is taken here");
  app.add_option("--timeout", opts.timeout_seconds, "I/O timeout per connection, seconds");
  app.add_flag("--no-sandbox", no_sandbox, "do not apply the seccomp allowlist (debugging)");
  bool cold = false;
  app.add_flag("--cold", cold,
               "restore only once the stream is complete (default: build the process while "
               "generations arrive)");
  app.add_flag("--json", json, "print one JSON line per received process on stdout");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  opts.sandbox = !no_sandbox;
  opts.warm = !cold;

  auto rc = ckpt::Receiver::open(opts);
  if (!rc.ok()) return ckpt::cli::fail("cr_recv", rc.error());
  ckpt::Receiver& recv = **rc;
  for (;;) {
    auto r = recv.serve_one();
    // Restored processes that ended meanwhile (not --once): reap them.
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (!r.ok()) {
      if (once) return ckpt::cli::fail("cr_recv", r.error());
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
                             {"restore_seconds", r->restore_seconds}});
    }
    if (once) {
      std::fflush(stdout);
      return ckpt::cli::wait_child(r->pid);
    }
  }
}
