// cr_slurm: what a Slurm task runs in its program's place when it was
// started with --ckpt-dir (the libckpt SPANK plugin puts it there). It runs
// the task's program as a checkpointed job, cr_run's loop, in
// DIR/job-J/step-S/task-T; after a requeue it restores the task from there
// instead of starting it again. Before the time limit (--ckpt-before-end)
// or on --ckpt-signal it checkpoints, stops the task and, from task 0 once
// every task of the step has stopped, requeues the job (docs/slurm.md).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>

#include "cr_run/supervisor.hpp"
#include "cr_slurm/manifest.hpp"
#include "cr_slurm/slurm_commands.hpp"
#include "cr_slurm/task.hpp"
#include "util/clock.hpp"

namespace {

// Without a place for its checkpoints the task still runs, as it would
// have without the plugin: the user is told once, on the task's stderr.
[[noreturn]] void run_unprotected(const cr_slurm::Task& t, const std::string& why) {
  std::fprintf(stderr, "cr_slurm: task %s of job %s runs without checkpoints: %s\n", t.task.c_str(),
               t.job.c_str(), why.c_str());
  std::vector<char*> argv;
  for (const auto& a : t.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "cr_slurm: cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

// The stop time before the time limit, or 0 (none asked, no limit, or too
// late already: said once, unless `quiet`).
double stop_time(const cr_slurm::Task& t, cr_run::Log& log, bool quiet = false) {
  if (t.before_end_s < 0) return 0;
  auto left = cr_slurm::time_left(t.job);
  if (!left.ok()) {
    log.event("warning",
              "--ckpt-before-end: " + left.error().message + ": no stop before the time limit");
    return 0;
  }
  if (*left < 0) return 0;  // no time limit
  if (*left <= t.before_end_s) {
    if (quiet) return 0;
    log.event("warning", "--ckpt-before-end=" + std::to_string(t.before_end_s) + ": only " +
                             std::to_string(*left) + " s are left: no stop before the time limit");
    return 0;
  }
  return ckpt::unix_now_seconds() + double(*left - t.before_end_s);
}

// Task 0 requeues the job once every task of its step recorded its stop
// (their checkpoints are committed), or after `wait_s`: a task that has not
// stopped by then restarts from its newest committed checkpoint.
void wait_for_the_step(const cr_slurm::Task& t, const std::string& step_dir, double wait_s,
                       cr_run::Log& log) {
  const double until = ckpt::unix_now_seconds() + wait_s;
  for (unsigned k = 1; k < t.tasks_in_step; ++k) {
    const std::string dir = step_dir + "/task-" + std::to_string(k);
    for (;;) {
      auto st = cr_run::load(dir);
      if (st.ok() && (st->stopped || st->finished)) break;
      if (ckpt::unix_now_seconds() >= until) {
        log.event("warning", "task " + std::to_string(k) + " did not stop in " +
                                 std::to_string(long(wait_s)) +
                                 " s: requeueing anyway (it restarts from its newest checkpoint)");
        break;
      }
      ::usleep(100000);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto taken = cr_slurm::take_task(argc, argv);
  if (!taken.ok()) {
    std::fprintf(stderr, "cr_slurm: %s\n", taken.error().message.c_str());
    return 2;
  }
  const cr_slurm::Task& t = *taken;
  std::error_code ec;
  std::filesystem::create_directories(t.dir, ec);
  if (ec) run_unprotected(t, "cannot create " + t.dir + ": " + ec.message());
  if (::access(t.dir.c_str(), W_OK) != 0) run_unprotected(t, t.dir + ": " + std::strerror(errno));
  if (!t.schedule.local_dir.empty()) {
    std::filesystem::create_directories(t.schedule.local_dir, ec);
    if (ec) run_unprotected(t, "cannot create " + t.schedule.local_dir + ": " + ec.message());
  }
  if (auto s = cr_slurm::record_run(t); !s.ok())
    std::fprintf(stderr, "cr_slurm: warning: %s\n", s.error().message.c_str());
  // Steps the task starts (srun inside a checkpointed batch script) are not
  // checkpointed a second time.
  ::setenv("CR_SLURM_INSIDE", (t.job + "." + t.step + "." + t.task).c_str(), 1);

  cr_run::Log log(false, stderr, "cr_slurm");
  cr_run::Triggers triggers;
  triggers.stop_signal = t.stop_signal;
  triggers.checkpoint_signal = t.stop_signal == SIGUSR2 ? SIGUSR1 : SIGUSR2;
  triggers.stop_at = stop_time(t, log);
  // The time limit may have been extended meanwhile (scontrol update).
  triggers.stop_moved = [&t, &log]() {
    const double later = stop_time(t, log, true);
    return later > ckpt::unix_now_seconds() + 1 ? later : 0.0;
  };
  // Slurm's SIGTERM takes the task off the node (scancel, requeue,
  // preemption, the time limit): if the job runs again, it is restored.
  triggers.termination_ends_job = false;
  cr_run::block_signals(triggers);

  int rc;
  if (auto old = cr_run::load(t.dir); old.ok()) {
    // The job runs again: the task is restored (or, if its step had
    // finished, not run again). Its local level is this node's now: the
    // one recorded was on the node it ran on before.
    old->schedule.local_dir = t.schedule.local_dir;
    cr_run::Supervisor sup(t.dir, std::move(*old), log, triggers);
    rc = sup.resume();
  } else {
    cr_run::State st;
    st.command = t.command;
    st.schedule = t.schedule;
    if (auto s = cr_run::save(t.dir, st); !s.ok()) run_unprotected(t, s.error().message);
    cr_run::Supervisor sup(t.dir, std::move(st), log, triggers);
    rc = sup.run();
  }
  if (rc != cr_run::kStoppedExit || t.task != "0") return rc;
  wait_for_the_step(t, std::filesystem::path(t.dir).parent_path().string(),
                    t.before_end_s > 0 ? double(t.before_end_s) / 2 : 30, log);
  if (auto s = cr_slurm::requeue(t.job); !s.ok()) {
    log.event("requeue_failed", "cannot requeue job " + t.job + ": " + s.error().message +
                                    " (its checkpoints are committed: `scontrol requeue " + t.job +
                                    "` restores it)");
    return rc;
  }
  log.event("requeue",
            "requeued job " + t.job + ": it restores from " + t.dir + " when it runs again");
  return 0;
}
