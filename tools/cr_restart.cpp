// cr_restart --dir DIR [--chain N] [--generation N] [--detach] [--new-pid] [--force] [--json]:
// restore a checkpointed process, wait for it and exit with its status.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "common/cli.hpp"
#include "common/pid_namespace.hpp"

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
  app.add_flag("--new-pid", opts.new_pid,
               "where a PID is taken: a process takes a new one, a job runs in a PID namespace "
               "of its own");
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
  // A job's members keep their PIDs: where one is taken, --new-pid restores
  // the job in a PID namespace of its own instead.
  pid_t child = 0, init = 0;
  if (!r.ok() && r.error().code == EEXIST && opts.new_pid) {
    auto n = ckpt::cli::restore_in_pid_namespace(opts);
    if (n.ok()) {
      init = n->init;
      child = n->root;
      r = n->stats;
    } else {
      r = n.error();
    }
  } else if (r.ok()) {
    child = r->pid;
  }
  ckpt::cli::progress_done();
  if (!r.ok()) return ckpt::cli::fail("cr_restart", r.error());
  const ckpt::RestoreStats& s = *r;
  if (init)
    std::fprintf(stderr,
                 "cr_restart: PIDs of the job are taken here: it runs in a PID namespace of its "
                 "own whose init is PID %d (root PID %d there, %d here); reach it with "
                 "nsenter --target %d --pid --mount\n",
                 int(init), int(s.pid), int(child), int(init));
  if (json) {
    ckpt::cli::print_json({{"pid", child},
                           {"pid_namespace_init", init},
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
    std::printf("%d\n", int(child));
  }
  if (detach) return 0;
  std::fflush(stdout);
  return ckpt::cli::wait_child(init ? init : child);
}
