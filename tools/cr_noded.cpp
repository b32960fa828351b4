// cr_noded --listen ADDR:PORT --token FILE --dir DIR: the per-node agent of
// jobs across nodes, driven by cr_job (docs/nodes.md).
#include "common/cli.hpp"
#include "nodes/daemon.hpp"

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
  auto r = ckpt::nodes::run_daemon(opts);
  if (!r.ok()) return ckpt::cli::fail("cr_noded", r.error());
  return 0;
}
