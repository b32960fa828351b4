// cr_pause --dir DIR [--chain N] [--tree] [--detach] [--json] PID: roll a live process
// back in place to its newest checkpoint; a job (a chain taken with --tree)
// by kill and restore with the same PIDs.
#include <ckpt/pause.hpp>
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Roll a running process back in place to the newest checkpoint in DIR: the same\n"
      "process and PID continue from the checkpointed state (memory, layout, registers,\n"
      "signal state, file descriptors and offsets). File contents are not rolled back.\n"
      "A job of several processes (cr_full --tree) is rolled back by kill and restore with\n"
      "the same PIDs instead: its root then runs as a child of cr_pause, which waits for it\n"
      "and exits with its status (like cr_restart; --detach returns at once)."};
  ckpt::PauseOptions opts;
  bool json = false, detach = false;
  uint64_t chain = 0;
  app.add_option("--dir", opts.dir,
                 "checkpoint directory of the process (a chain, or cr_run's directory of chains)")
      ->required();
  app.add_option("--chain", chain, "a directory of chains: this chain (default: the newest)");
  app.add_option("pid", opts.pid, "process to roll back")->required();
  app.add_flag("--tree", opts.tree,
               "the job of PID (implied by a chain taken with --tree): kill and restore");
  app.add_flag("--detach", detach, "a job: return once it runs instead of waiting for its root");
  app.add_flag("--json", json, "print statistics as JSON on stdout");
  ckpt::cli::add_trace_option(app, opts.log, "cr_pause");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (auto d = ckpt::resolve_checkpoint_dir(opts.dir, chain); d.ok())
    opts.dir = *d;
  else
    return ckpt::cli::fail("cr_pause", d.error());
  auto r = ckpt::pause_process(opts);
  if (!r.ok()) return ckpt::cli::fail("cr_pause", r.error());
  const ckpt::PauseStats& s = *r;
  const bool restarted = s.how == "restart";
  if (restarted)
    std::fprintf(stderr,
                 "cr_pause: the job of %llu processes was rolled back by kill and restore with "
                 "the same PIDs; its root %d is now a child of cr_pause%s\n",
                 (unsigned long long)s.processes, int(s.pid),
                 detach ? " (detached: nobody waits for it)" : ", which waits for it");
  if (json)
    ckpt::cli::print_json({{"generation", s.generation},
                           {"how", s.how},
                           {"pid", s.pid},
                           {"processes", s.processes},
                           {"method", s.method},
                           {"pages_compared", s.pages_compared},
                           {"pages_written", s.pages_written},
                           {"pages_dropped", s.pages_dropped},
                           {"vmas_kept", s.vmas_kept},
                           {"vmas_unmapped", s.vmas_unmapped},
                           {"vmas_mapped", s.vmas_mapped},
                           {"files_reopened", s.files_reopened},
                           {"files_closed", s.files_closed},
                           {"frozen_seconds", s.frozen_seconds},
                           {"reap_seconds", s.reap_seconds},
                           {"restore_seconds", s.restore_seconds},
                           {"seconds", s.seconds}});
  if (!restarted || detach) return 0;
  std::fflush(stdout);
  return ckpt::cli::wait_child(s.pid);
}
