// cr_full --dir DIR [--tree] [--kill] [--force] [--json] PID: write a full checkpoint of a running
// job.
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Write a full checkpoint of a running process. The process keeps running\n"
      "(unless --kill); on failure it is left exactly as it was."};
  ckpt::CheckpointOptions opts;
  bool json = false;
  ckpt::cli::add_checkpoint_options(app, "cr_full", opts, json,
                                    "checkpoint directory (created if missing)",
                                    "dirty-page tracker for later incrementals");
  app.add_flag("--force", opts.force,
               "if DIR holds another process's chain, move it aside into DIR/replaced-<chain id> "
               "instead of refusing");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;

  opts.progress = ckpt::cli::progress_line("checkpoint");
  auto r = ckpt::checkpoint_full(opts);
  ckpt::cli::progress_done();
  if (!r.ok()) return ckpt::cli::fail("cr_full", r.error());
  if (!r->moved_aside.empty())
    std::fprintf(stderr, "cr_full: moved the chain that was in %s to %s\n", opts.dir.c_str(),
                 r->moved_aside.c_str());
  if (!r->members_changed.empty())
    std::fprintf(stderr,
                 "cr_full: %s during the pre-copy; the checkpoint holds the job as it was at the "
                 "final freeze\n",
                 r->members_changed.c_str());
  if (json) ckpt::cli::print_json(ckpt::cli::stats_json(*r));
  return 0;
}
