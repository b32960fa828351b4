// cr_restart --dir DIR [--chain N] [--generation N] [--detach] [--new-pid] [--force] [--json]:
// restore a checkpointed process, wait for it and exit with its status.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Restore a checkpointed process as a child of this command, wait for it and\n"
      "exit with its exit status (128 + N if signal N ended it)."};
  ckpt::RestoreOptions opts;
  bool json = false, detach = false;
  uint64_t chain = 0;
  app.add_option("--dir", opts.dir,
                 "checkpoint directory (a chain, or cr_run's directory of chains)")
      ->required();
  app.add_option("--chain", chain,
                 "a directory of chains: restore from this chain (default: the newest)");
  app.add_option("--generation", opts.generation, "restore this generation (default: newest)");
  app.add_flag("--detach", detach, "print the restored PID and return once it runs");
  app.add_flag("--new-pid", opts.new_pid, "use a new PID if the original one is taken");
  app.add_flag("--force", opts.force,
               "restore even if files the process uses changed on disk since the checkpoint");
  app.add_flag("--json", json, "print statistics as JSON on stdout");
  ckpt::cli::add_trace_option(app, opts.log, "cr_restart");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (auto d = ckpt::resolve_checkpoint_dir(opts.dir, chain); d.ok())
    opts.dir = *d;
  else
    return ckpt::cli::fail("cr_restart", d.error());

  opts.progress = ckpt::cli::progress_line("restore");
  auto r = ckpt::restore_process(opts);
  ckpt::cli::progress_done();
  if (!r.ok()) return ckpt::cli::fail("cr_restart", r.error());
  const ckpt::RestoreStats& s = *r;
  if (json) {
    ckpt::cli::print_json({{"pid", s.pid},
                           {"processes", s.processes},
                           {"generation", s.generation},
                           {"restore_seconds", s.seconds},
                           {"vmas", s.vmas},
                           {"pages_read", s.pages_read},
                           {"pages_written", s.pages_written},
                           {"pages_zero", s.pages_zero},
                           {"pages_skipped", s.pages_skipped},
                           {"generations_read", s.generations_read},
                           {"tracking", s.tracking},
                           {"bytes_read", s.bytes_read}});
  } else if (detach) {
    std::printf("%d\n", s.pid);
  }
  if (detach) return 0;
  std::fflush(stdout);
  return ckpt::cli::wait_child(s.pid);
}
