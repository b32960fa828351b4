#include "cr_slurm/task.hpp"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cr_slurm {

namespace {

// Reads and removes one variable; empty when absent.
std::string take_env(const char* name) {
  const char* v = std::getenv(name);
  std::string out = v ? v : "";
  ::unsetenv(name);
  return out;
}

bool whole(const std::string& s, unsigned long& out) {
  if (s.empty() || s[0] == '-') return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoul(s.c_str(), &end, 10);
  return errno == 0 && *end == 0;
}

int signal_named(const std::string& s) {
  const std::string name = s.rfind("SIG", 0) == 0 ? s.substr(3) : s;
  unsigned long n = 0;
  if (whole(name, n)) return int(n);
  for (int i = 1; i < NSIG; ++i)
    if (const char* a = ::sigabbrev_np(i); a && name == a) return i;
  return 0;
}

}  // namespace

long parse_time_left(const std::string& text) {
  long days = 0;
  std::string clock = text;
  if (auto dash = text.find('-'); dash != std::string::npos) {
    unsigned long d = 0;
    if (!whole(text.substr(0, dash), d)) return -1;
    days = long(d);
    clock = text.substr(dash + 1);
  }
  std::vector<long> fields;
  size_t at = 0;
  for (;;) {
    const size_t colon = clock.find(':', at);
    unsigned long v = 0;
    if (!whole(clock.substr(at, colon == std::string::npos ? colon : colon - at), v)) return -1;
    fields.push_back(long(v));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  if (fields.size() < 2 || fields.size() > 3) return -1;
  if (fields.size() == 2) fields.insert(fields.begin(), 0);
  return ((days * 24 + fields[0]) * 60 + fields[1]) * 60 + fields[2];
}

ckpt::Result<Task> take_task(int argc, char** argv) {
  Task t;
  const std::string command0 = take_env("CR_SLURM_COMMAND0");
  const std::string base = take_env("CR_SLURM_DIR");
  t.job = take_env("CR_SLURM_JOB");
  t.step = take_env("CR_SLURM_STEP");
  t.task = take_env("CR_SLURM_TASK");
  const std::string interval = take_env("CR_SLURM_INTERVAL");
  const std::string incrementals = take_env("CR_SLURM_INCREMENTALS");
  const std::string keep = take_env("CR_SLURM_KEEP");
  const std::string before_end = take_env("CR_SLURM_BEFORE_END");
  const std::string sig = take_env("CR_SLURM_SIGNAL");
  (void)take_env("CR_SLURM_BATCH");
  std::string local = take_env("CR_SLURM_LOCAL");
  if (command0.empty() || base.empty() || t.job.empty() || t.step.empty() || t.task.empty())
    return ckpt::make_error(EINVAL,
                            "not started by the libckpt SPANK plugin (no CR_SLURM_COMMAND0, "
                            "CR_SLURM_DIR, ...): run jobs with srun/sbatch --ckpt-dir=DIR");
  t.dir = base + "/job-" + t.job + "/step-" + t.step + "/task-" + t.task;
  t.command.push_back(command0);
  for (int i = 1; i < argc; ++i) t.command.emplace_back(argv[i]);

  // Defaults for a batch system: a checkpoint every 10 minutes; a task that
  // dies by a signal is restored in place at most 3 times, as cr_run does.
  t.schedule.interval_s = 600;
  unsigned long v = 0;
  if (interval == "auto") {
    t.schedule.auto_interval = true;
    t.schedule.interval_s = 0;
    t.schedule.mtbf_s = 24 * 3600;
  } else if (!interval.empty()) {
    if (!whole(interval, v)) return ckpt::make_error(EINVAL, "--ckpt-interval: " + interval);
    t.schedule.interval_s = double(v);
  }
  if (!incrementals.empty()) {
    if (!whole(incrementals, v)) return ckpt::make_error(EINVAL, "--ckpt-incrementals");
    t.schedule.incrementals = v;
  }
  if (!keep.empty()) {
    if (!whole(keep, v) || v == 0) return ckpt::make_error(EINVAL, "--ckpt-keep: " + keep);
    t.schedule.keep = v;
  }
  if (!before_end.empty()) {
    if (!whole(before_end, v)) return ckpt::make_error(EINVAL, "--ckpt-before-end");
    t.before_end_s = long(v);
  }
  if (!local.empty()) {
    // %n: the node's name, for a local directory on storage the nodes share.
    const char* node = std::getenv("SLURMD_NODENAME");
    for (size_t at; (at = local.find("%n")) != std::string::npos;)
      local.replace(at, 2, node ? node : "node");
    t.schedule.local_dir = local + "/job-" + t.job + "/step-" + t.step + "/task-" + t.task;
  }
  t.stop_signal = sig.empty() ? SIGUSR1 : signal_named(sig);
  if (t.stop_signal <= 0 || t.stop_signal >= NSIG)
    return ckpt::make_error(EINVAL, "--ckpt-signal: " + sig);
  if (t.step != "batch")
    if (const char* n = std::getenv("SLURM_NTASKS"); n && whole(n, v) && v > 0)
      t.tasks_in_step = unsigned(v);
  return t;
}

}  // namespace cr_slurm
