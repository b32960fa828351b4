// cr_full --dir DIR [--tree] [--kill] [--force] [--json] PID: write a full checkpoint of a running
// job.
#include <ckpt/tracker.hpp>
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Write a full checkpoint of a running process. The process keeps running\n"
      "(unless --kill); on failure it is left exactly as it was."};
  ckpt::CheckpointOptions opts;
  bool json = false;
  app.add_option("--dir", opts.dir, "checkpoint directory (created if missing)")->required();
  app.add_option("pid", opts.pid, "process to checkpoint (with --tree: the root of the job)")
      ->required();
  app.add_flag("--tree", opts.tree, "the process and all its descendants, as one job");
  app.add_flag("--kill", opts.kill_after, "end the process after a successful checkpoint");
  app.add_flag("--json", json, "print statistics as JSON on stdout");
  app.add_flag("--tcp-established", opts.tcp_established,
               "save TCP connections to peers outside the job in repair mode (docs/nodes.md)");
  app.add_flag("--live", opts.live,
               "copy memory while the process runs, then freeze it only for what it wrote since");
  app.add_option_function<uint64_t>(
         "--scratch-max", [&opts](uint64_t mib) { opts.scratch_max_bytes = mib << 20; },
         "MiB of files on tmpfs and in temporary directories saved with each checkpoint, per "
         "process (default 512)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 30));
  ckpt::cli::add_compress_option(app, opts.compress_level);
  app.add_flag("--no-sync", opts.no_sync,
               "skip the fsyncs: faster, but an OS crash or power loss may lose this generation "
               "(a killed tool never leaves a half one visible)");
  app.add_flag("--direct", opts.direct_io,
               "write pages with O_DIRECT, bypassing the page cache (longer freeze)");
  app.add_option("--tracker", opts.tracker, "dirty-page tracker for later incrementals")
      ->check(CLI::IsMember(ckpt::tracker_choices()));
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
