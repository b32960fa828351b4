// cr_pause --dir DIR [--json] PID: roll a live process back in place to its
// newest checkpoint.
#include <ckpt/pause.hpp>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Roll a running process back in place to the newest checkpoint in DIR: the same\n"
      "process and PID continue from the checkpointed state (memory, layout, registers,\n"
      "signal state, file descriptors and offsets). File contents are not rolled back."};
  ckpt::PauseOptions opts;
  bool json = false;
  app.add_option("--dir", opts.dir, "checkpoint directory of the process")->required();
  app.add_option("pid", opts.pid, "process to roll back")->required();
  app.add_flag("--json", json, "print statistics as JSON on stdout");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  auto r = ckpt::pause_process(opts);
  if (!r.ok()) return ckpt::cli::fail("cr_pause", r.error());
  const ckpt::PauseStats& s = *r;
  if (json)
    ckpt::cli::print_json({{"generation", s.generation},
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
                           {"seconds", s.seconds}});
  return 0;
}
