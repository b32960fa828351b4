// cr_noded --listen ADDR:PORT --token FILE --dir DIR: the per-node agent of
// jobs across nodes, driven by cr_job (docs/nodes.md). The library serves
// (nodes::Daemon); the loop, the signals and the log are this tool's.
#include <signal.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstring>

#include "common/cli.hpp"
#include "nodes/daemon.hpp"

namespace {
volatile sig_atomic_t g_stop = 0;
void on_stop(int) {
  g_stop = 1;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Per-node agent of a job across nodes: freezes, saves, releases and restores this node's\n"
      "part of the job when cr_job says so (token-authenticated, like cr_recv)."};
  ckpt::nodes::DaemonOptions opts;
  app.add_option("--listen", opts.listen, "address to listen on, ADDR:PORT (* for any)")
      ->required();
  app.add_option("--token", opts.token_file, "shared token file (owner-only)")->required();
  app.add_option("--dir", opts.dir, "this node's checkpoint set (created if missing)")->required();
  app.add_option("--timeout", opts.timeout,
                 "seconds to wait for cr_job at each step before the round is aborted "
                 "(default 60)");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  opts.log = ckpt::cli::stderr_log("cr_noded", true);
  // Restored jobs outlive the session that built them: they become ours.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    return ckpt::cli::fail("cr_noded",
                           std::string("PR_SET_CHILD_SUBREAPER: ") + std::strerror(errno));
  auto daemon = ckpt::nodes::Daemon::open(opts);
  if (!daemon.ok()) return ckpt::cli::fail("cr_noded", daemon.error());
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  std::fprintf(stderr, "cr_noded: listening on %s, checkpoints in %s\n", opts.listen.c_str(),
               opts.dir.c_str());
  while (!g_stop)
    if (auto s = (*daemon)->step(200); !s.ok()) return ckpt::cli::fail("cr_noded", s.error());
  return 0;
}
