// cr_run --dir DIR [--interval S|auto [--mtbf T]] [--incrementals N] [--keep K] [--restarts R]
//        [--json] [--log FILE] -- COMMAND ARGS...
// cr_run --resume DIR [--json] [--log FILE]
// The launcher that embeds libckpt: runs a job, checkpoints it on a schedule,
// restarts it after a death by signal, and continues it after its own death.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "common/cli.hpp"
#include "common/units.hpp"
#include "cr_run/auto_interval.hpp"
#include "cr_run/supervisor.hpp"
#include "migrate/protocol.hpp"
#include "nodes/partner.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "Run COMMAND (and everything it starts) as a checkpointed job: a full checkpoint,\n"
      "then N incrementals, then a new chain, every S seconds and on SIGUSR1; older\n"
      "chains pruned to K. When the job dies by a signal it is restarted from the\n"
      "newest committed checkpoint, up to R times. SIGUSR2 stops the job after a\n"
      "checkpoint (exit status 75). --resume DIR continues the job of a cr_run that\n"
      "died, of a node that rebooted, or of a stop. Exits with the job's status."};
  std::string dir, resume, log_path, interval = "60", mtbf;
  cr_run::Schedule sched;
  bool json = false;
  std::vector<std::string> command;
  auto* d = app.add_option("--dir", dir, "directory of the job's checkpoints and state");
  auto* r = app.add_option("--resume", resume, "continue the job recorded in this directory");
  d->excludes(r);
  auto* iv =
      app.add_option("--interval", interval,
                     "seconds between checkpoints (default 60; 0: only on SIGUSR1), or auto: "
                     "planned by cr_plan from this job's measured checkpoint costs and --mtbf");
  auto* mt =
      app.add_option("--mtbf", mtbf,
                     "with --interval auto: the platform's MTBF (seconds, or 30min, 12h, 2d; "
                     "default 1d)");
  app.add_option("--incrementals", sched.incrementals,
                 "incrementals after each full before a new chain (default 4)");
  app.add_option("--keep", sched.keep, "chains kept (default 2)")->check(CLI::Range(1, 1000000));
  app.add_option("--restarts", sched.restarts,
                 "automatic restarts after a death by signal (default 3)");
  auto* buf = app.add_flag(
      "--buffered", sched.buffered,
      "write page content through the page cache (default: O_DIRECT, where the filesystem "
      "allows it, so that a scheduled checkpoint neither competes with the job for memory "
      "bandwidth nor fills the node's page cache)");
  std::string local;
  double flush_mib = 0;
  auto* lo = app.add_option(
      "--local", local,
      "two levels: write each checkpoint to this node-local directory (the job is released once "
      "it is committed there) and copy it to --dir in the background; a restart takes the "
      "nearest level that holds the newest checkpoint");
  auto* fr = app.add_option("--flush-rate", flush_mib,
                            "with --local: MiB per second of the copy to --dir (default: "
                            "unlimited)")
                 ->check(CLI::PositiveNumber);
  auto* pa = app.add_option(
      "--partner", sched.partner,
      "with --local: a third level, another node's agent (cr_noded, HOST:PORT) that keeps a copy "
      "of every checkpoint, sent in the background; a restart on a node that lost the local "
      "level fetches it from there when it is newer than the shared level's");
  auto* pt = app.add_option("--partner-token", sched.partner_token,
                            "the partner agent's token file (owner-only)");
  auto* pn = app.add_option("--partner-name", sched.partner_name,
                            "the name the partner keeps the copies under (default: one made "
                            "for this job)");
  app.add_flag("--json", json, "log one JSON object per line");
  app.add_option("--log", log_path, "append the log to FILE instead of stderr");
  app.add_option("command", command, "the job's command and arguments (after --)");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  if (dir.empty() && resume.empty())
    return ckpt::cli::usage_error("cr_run", "say --dir DIR or --resume DIR");
  if (interval == "auto") {
    sched.auto_interval = true;
    sched.interval_s = 0;
    sched.mtbf_s = cr_run::AutoInterval::kDefaultMtbf_s;
    if (!mtbf.empty()) {
      auto m = ckpt::cli::parse_duration(mtbf);
      if (!m || !(*m > 0))
        return ckpt::cli::usage_error("cr_run", "--mtbf: not a positive duration: " + mtbf);
      sched.mtbf_s = *m;
    }
    cr_run::AutoInterval first(sched.mtbf_s);  // the provisional plan must hold
    if (std::string err; !first.plan(err))
      return ckpt::cli::usage_error("cr_run", "--interval auto --mtbf " + mtbf + ": " + err);
  } else {
    char* end = nullptr;
    sched.interval_s = std::strtod(interval.c_str(), &end);
    if (interval.empty() || *end || !(sched.interval_s >= 0 && sched.interval_s <= 1e9))
      return ckpt::cli::usage_error("cr_run",
                                    "--interval: not seconds in [0, 1e9] or auto: " + interval);
    if (!mtbf.empty()) return ckpt::cli::usage_error("cr_run", "--mtbf needs --interval auto");
  }
  if (!resume.empty() && (iv->count() || mt->count() || buf->count() || lo->count() ||
                          fr->count() || pa->count() || pt->count() || pn->count()))
    return ckpt::cli::usage_error("cr_run",
                                  "--resume keeps the recorded schedule: no --interval, --mtbf, "
                                  "--buffered, --local, --flush-rate or --partner*");
  if (fr->count() && local.empty())
    return ckpt::cli::usage_error("cr_run", "--flush-rate needs --local");
  if ((pt->count() || pn->count()) && !pa->count())
    return ckpt::cli::usage_error("cr_run", "--partner-token and --partner-name need --partner");
  if (pa->count()) {
    if (local.empty()) return ckpt::cli::usage_error("cr_run", "--partner needs --local");
    std::string host, port;
    if (!ckpt::migrate::split_host_port(sched.partner, &host, &port).ok())
      return ckpt::cli::usage_error("cr_run", "--partner: not HOST:PORT: " + sched.partner);
    if (sched.partner_token.empty())
      return ckpt::cli::usage_error("cr_run", "--partner needs --partner-token FILE");
    if (auto t = ckpt::migrate::load_token(sched.partner_token); !t.ok())
      return ckpt::cli::usage_error("cr_run", "--partner-token: " + t.error().message);
    if (sched.partner_name.empty()) sched.partner_name = cr_run::new_part_name();
    if (!ckpt::nodes::valid_part_name(sched.partner_name))
      return ckpt::cli::usage_error("cr_run",
                                    "--partner-name: not 1-128 characters of "
                                    "[A-Za-z0-9._-] without a leading dot: " +
                                        sched.partner_name);
  }
  if (!local.empty()) {
    if (local[0] != '/') return ckpt::cli::usage_error("cr_run", "--local: not absolute: " + local);
    if (::mkdir(local.c_str(), 0700) != 0 && errno != EEXIST)
      return ckpt::cli::fail("cr_run", ckpt::sys_error("creating " + local));
    sched.local_dir = local;
    sched.flush_rate = flush_mib * double(1 << 20);
  }
  if (!resume.empty() && !command.empty())
    return ckpt::cli::usage_error("cr_run", "--resume takes no command: it runs the recorded one");
  if (!dir.empty() && command.empty())
    return ckpt::cli::usage_error("cr_run",
                                  "no command: cr_run --dir DIR [options] -- COMMAND ARGS...");

  FILE* out = stderr;
  if (!log_path.empty()) {
    out = std::fopen(log_path.c_str(), "ae");
    if (!out) return ckpt::cli::fail("cr_run", ckpt::sys_error("opening " + log_path));
  }
  cr_run::Log log(json, out);
  cr_run::block_signals();

  if (!resume.empty()) {
    auto st = cr_run::load(resume);
    if (!st.ok()) return ckpt::cli::fail("cr_run", st.error());
    cr_run::Supervisor sup(resume, std::move(*st), log);
    return sup.resume();
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return ckpt::cli::fail("cr_run", ckpt::sys_error("creating " + dir));
  if (auto old = cr_run::load(dir); old.ok() && !old->finished)
    return ckpt::cli::fail("cr_run", dir + " holds a job that has not finished: cr_run --resume " +
                                         dir + " continues it");
  cr_run::State st;
  st.command = command;
  st.schedule = sched;
  if (auto s = cr_run::save(dir, st); !s.ok()) return ckpt::cli::fail("cr_run", s.error());
  cr_run::Supervisor sup(dir, std::move(st), log);
  return sup.run();
}
