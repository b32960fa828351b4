// cr_incr --dir DIR [--tracker T] [--tree] [--kill] [--json] PID: incremental checkpoint.
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Write an incremental checkpoint: only the pages the process wrote since the\n"
      "newest checkpoint in DIR, plus its complete current state. The process keeps\n"
      "running (unless --kill); on failure it is left exactly as it was."};
  ckpt::CheckpointOptions opts;
  bool json = false;
  ckpt::cli::add_checkpoint_options(app, "cr_incr", opts, json,
                                    "checkpoint directory holding the chain",
                                    "dirty-page tracker (cr_check lists them)");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;

  opts.progress = ckpt::cli::progress_line("incremental");
  auto r = ckpt::checkpoint_incremental(opts);
  ckpt::cli::progress_done();
  if (!r.ok()) return ckpt::cli::fail("cr_incr", r.error());
  if (!r->members_changed.empty())
    std::fprintf(stderr,
                 "cr_incr: %s during the pre-copy; the checkpoint holds the job as it was at the "
                 "final freeze\n",
                 r->members_changed.c_str());
  if (json) ckpt::cli::print_json(ckpt::cli::stats_json(*r));
  return 0;
}
