// cr_migrate --to HOST:PORT --token FILE (--frozen|--live) [--tree] [--json] PID:
// move a running process (--tree: its whole job) to the node where cr_recv listens.
#include <signal.h>

#include <ckpt/migrate.hpp>
#include <ckpt/tracker.hpp>
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Move a running process (--tree: its whole job) to another node (where cr_recv\n"
      "listens). The process here ends only after the destination reports it running; on\n"
      "any failure it continues here as if nothing happened."};
  ckpt::MigrateOptions opts;
  bool json = false, frozen = false, live = false;
  app.add_option("--to", opts.to, "receiver address HOST:PORT")->required();
  app.add_option("--token", opts.token_file, "shared token file (owner-only)")->required();
  auto* f = app.add_flag("--frozen", frozen, "stop the process, send everything, resume there");
  auto* l = app.add_flag("--live", live, "pre-copy while the process runs, then a short stop");
  f->excludes(l);
  app.add_option("pid", opts.pid, "process to migrate")->required();
  app.add_flag(
      "--tree", opts.tree,
      "the process and all its descendants, as one job (docs/jobs.md, \"Migration of a job\")");
  app.add_option("--tracker", opts.tracker, "live: dirty-page tracker of the pre-copy rounds")
      ->check(CLI::IsMember(ckpt::tracker_choices()));
  app.add_option("--threshold", opts.threshold_bytes,
                 "live: stop pre-copy when the dirty set is under this many bytes (default 1 MiB)");
  app.add_option("--diff-threshold", opts.diff_bytes,
                 "live: stop pre-copy when the dirty set shrank by less than this many bytes "
                 "(default 256 KiB)");
  app.add_option("--deadline", opts.deadline_seconds,
                 "live: stop pre-copy after this many seconds (default 60)");
  app.add_option("--max-rounds", opts.max_rounds, "live: at most this many rounds (default 30)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--timeout", opts.timeout_seconds,
                 "connect and I/O timeout, seconds (default 60)");
  app.add_flag("--json", json, "print statistics as JSON on stdout");
  app.add_flag("--tcp-established", opts.tcp_established,
               "with --tree: TCP connections to peers outside the job, in repair mode");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (frozen == live) return ckpt::cli::fail("cr_migrate", "say --frozen or --live");
  opts.live = live;

  opts.progress = ckpt::cli::progress_line("migrate");
  auto r = ckpt::migrate_process(opts);
  ckpt::cli::progress_done();
  if (!r.ok()) {
    // Say what became of the process: it runs on here, unless it ended by
    // itself (a job that finished during the pre-copy, a PID that was not there).
    const bool alive = ::kill(opts.pid, 0) == 0 && !ckpt::cli::is_zombie(opts.pid);
    const std::string fate = alive ? " (PID " + std::to_string(opts.pid) + " continues here)"
                                   : " (PID " + std::to_string(opts.pid) + " is not running)";
    return ckpt::cli::fail("cr_migrate", r.error().message + fate);
  }
  const ckpt::MigrateStats& s = *r;
  if (json) {
    nlohmann::json rounds = nlohmann::json::array(), per = nlohmann::json::array();
    for (const auto& x : s.rounds) {
      per.push_back(x.bytes);
      rounds.push_back({{"generation", x.generation},
                        {"dirty_bytes", x.dirty_bytes},
                        {"bytes", x.bytes},
                        {"seconds", x.seconds},
                        {"send_seconds", x.send_seconds},
                        {"frozen_seconds", x.frozen_seconds}});
    }
    ckpt::cli::print_json({{"mode", s.live ? "live" : "frozen"},
                           {"tracker", s.tracker},
                           {"rounds", s.rounds.size()},
                           {"bytes_per_round", per},
                           {"round_details", rounds},
                           {"bytes_total", s.bytes_total},
                           {"migration_seconds", s.migration_seconds},
                           {"downtime_seconds", s.downtime_seconds},
                           {"stop_reason", s.stop_reason},
                           {"processes", s.processes},
                           {"remote_pid", s.remote_pid}});
  }
  return 0;
}
