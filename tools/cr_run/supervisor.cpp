#include "cr_run/supervisor.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ckpt/ckpt.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/cli.hpp"
#include "cr_run/chains.hpp"
#include "cr_run/isolated.hpp"
#include "image/store.hpp"
#include "proc/tree.hpp"
#include "util/clock.hpp"

namespace cr_run {

namespace {

sigset_t g_taken, g_original;

using ckpt::unix_now_seconds;
double now() {
  return ckpt::now_seconds();
}

std::string mib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", double(bytes) / (1 << 20));
  return b;
}

std::string fixed(double v, int digits) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::vector<pid_t> my_children() {
  return ckpt::proc::children_of(::getpid());
}

// SIGKILL to `root` and every process below it, parents first (a member
// that forks meanwhile is caught on the next walk of its parent's children).
void kill_tree(pid_t root) {
  std::vector<pid_t> todo{root};
  for (size_t i = 0; i < todo.size() && i < 100000; ++i) {
    for (pid_t c : ckpt::proc::children_of(todo[i])) todo.push_back(c);
    ::kill(todo[i], SIGKILL);
  }
}

// As cr_run exits for a job that ended with wait status `st` (128 + N for
// signal N).
int exit_code_of(int st) {
  return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    const char* name = ::sigabbrev_np(WTERMSIG(st));
    return "was killed by signal " + std::to_string(WTERMSIG(st)) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended (status " + std::to_string(st) + ")";
}

// A checkpoint of the whole job into chain `chain` of `dir`, as every one
// cr_run takes: page content with O_DIRECT unless --buffered
// (docs/performance.md, "O_DIRECT for cr_run").
ckpt::CheckpointOptions job_checkpoint(const std::string& dir, uint64_t chain, const State& s) {
  ckpt::CheckpointOptions o;
  o.dir = chain_dir(dir, chain);
  o.pid = s.root;
  o.tree = true;
  o.direct_io = !s.schedule.buffered;
  o.log = ckpt::cli::stderr_log("cr_run", false);
  return o;
}

}  // namespace

void block_signals(const Triggers& triggers) {
  sigemptyset(&g_taken);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, triggers.checkpoint_signal, triggers.stop_signal})
    sigaddset(&g_taken, s);
  ::sigprocmask(SIG_BLOCK, &g_taken, &g_original);
}

void Supervisor::save() {
  if (auto s = cr_run::save(dir_, state_); !s.ok())
    log_.event("warning", "cannot record the job's state: " + s.error().message,
               {{"message", s.error().message}});
}

void Supervisor::start_planning() {
  if (!state_.schedule.auto_interval) return;
  auto_.emplace(state_.schedule.mtbf_s);
  std::string err;
  if (!auto_->plan(err))  // main() checked these figures: cannot happen
    log_.event("warning", "--interval auto: " + err, {{"message", err}});
}

const std::string& Supervisor::write_dir() const {
  return state_.schedule.local_dir.empty() ? dir_ : state_.schedule.local_dir;
}

void Supervisor::start_levels() {
  if (state_.schedule.local_dir.empty() || !flushers_.empty()) return;
  const std::string& local = state_.schedule.local_dir;
  if (!state_.schedule.partner.empty()) {
    const ckpt::nodes::Partner to = partner();
    FlushTarget t{"partner",
                  [to](const std::string& chain, Point p, uint64_t* bytes) -> std::string {
                    auto sent = ckpt::nodes::push_to_partner(to, chain, p.chain, p.generation);
                    if (!sent.ok()) return sent.error().message;
                    *bytes = *sent;
                    return "";
                  },
                  {},  // the partner's agent prunes its copies itself
                  [this](double s) { record_cost("partner", s); }};
    flushers_.push_back(std::make_unique<Flusher>(local, std::move(t), log_));
  }
  const double rate = state_.schedule.flush_rate;
  const uint64_t keep = state_.schedule.keep;
  const std::string shared = dir_;
  FlushTarget t{"shared",
                [shared, rate](const std::string& chain, Point p, uint64_t* bytes) {
                  return copy_generation(ckpt::image::generation_dir(chain, p.generation),
                                         chain_dir(shared, p.chain), rate, bytes);
                },
                [shared, keep] { prune(shared, keep); },
                [this](double s) { record_cost("shared", s); }};
  flushers_.push_back(std::make_unique<Flusher>(local, std::move(t), log_));
}

void Supervisor::record_cost(const std::string& level, double seconds) {
  state_.checkpoint_costs[level].add(seconds);
  save();
}

// A finished job is not restored again: its copies on the partner go
// (the partner's store is another node's memory or disk). Best effort: a
// partner that cannot be reached keeps them until they are removed there.
void Supervisor::drop_partner_copies() {
  if (state_.schedule.partner.empty()) return;
  for (auto& f : flushers_) f->cancel();  // or a copy in flight would store again
  ckpt::nodes::Partner p = partner();
  p.timeout = 5;
  if (auto s = ckpt::nodes::drop_at_partner(p); !s.ok())
    log_.event("warning",
               "the partner's copies stay (remove " + p.part + " there): " + s.error().message,
               {{"level", "partner"}, {"message", s.error().message}});
}

ckpt::nodes::Partner Supervisor::partner() const {
  ckpt::nodes::Partner p;
  p.addr = state_.schedule.partner;
  p.token_file = state_.schedule.partner_token;
  p.part = state_.schedule.partner_name;
  return p;
}

double Supervisor::period() const {
  return auto_ ? auto_->interval_s() : state_.schedule.interval_s;
}

// --interval auto, after a measured checkpoint or restore: plans again and
// adds the period and the figures it came from to the event's fields.
void Supervisor::replan(nlohmann::json& fields) {
  if (!auto_) return;
  std::string err;
  if (!auto_->plan(err))
    log_.event("warning", "--interval auto keeps " + fixed(auto_->interval_s(), 3) + " s: " + err,
               {{"message", err}, {"interval_s", auto_->interval_s()}});
  fields["plan"] = {{"C", auto_->C()},
                    {"R", auto_->R()},
                    {"R_source", auto_->r_source()},
                    {"mtbf_s", auto_->mtbf_s()}};
}

void Supervisor::record_root(pid_t pid) {
  state_.root = pid;
  state_.root_start = start_time(pid);
  save();
}

bool Supervisor::start_command() {
  pid_t pid = ::fork();
  if (pid < 0) {
    log_.event("error", std::string("fork: ") + std::strerror(errno));
    return false;
  }
  if (pid == 0) {
    ::sigprocmask(SIG_SETMASK, &g_original, nullptr);
    // Descriptors leaked to cr_run (pipes of a harness, sockets) would make
    // every checkpoint refuse the job: it gets stdin, stdout and stderr only.
    ::close_range(3, ~0u, 0);
    std::vector<char*> argv;
    for (auto& a : state_.command) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cr_run: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  state_.chain = 0;
  record_root(pid);
  log_.event("start", "started job " + std::to_string(pid) + ": " + state_.command[0],
             {{"pid", pid}, {"command", state_.command}});
  return true;
}

bool Supervisor::checkpoint(const std::string& why) {
  // A full into a new chain when there is no current chain or it is long
  // enough; else an incremental on the current chain.
  std::vector<uint64_t> gens;
  if (state_.chain) gens = generations(chain_dir(write_dir(), state_.chain));
  const bool full = gens.empty() || gens.size() >= 1 + state_.schedule.incrementals;
  uint64_t chain = state_.chain;
  if (full) chain = next_chain(dir_, write_dir());
  ckpt::CheckpointOptions o = job_checkpoint(write_dir(), chain, state_);
  // An adopted job's root is let go of while the checkpoint traces the job.
  if (adopted_) (void)adopted_->let_go();
  auto r = checkpoint_isolated(o, full);
  if (adopted_ && !adopted_root_gone()) (void)adopted_->watch();  // else the loop finds it gone
  if (adopted_ && adopted_->watching()) adopted_->remember_members();
  if (!r.ok()) {
    std::error_code ec;
    if (full) std::filesystem::remove(o.dir, ec);  // only if still empty
    state_.chain = 0;                              // start over with a full next time
    save();
    log_.event("checkpoint_failed", "checkpoint (" + why + ") failed: " + r.error().message,
               {{"reason", why}, {"message", r.error().message}});
    return false;
  }
  state_.chain = chain;
  if (!state_.schedule.local_dir.empty()) state_.checkpoint_costs["local"].add(r->total_seconds);
  save();
  const ckpt::CheckpointStats& s = *r;
  nlohmann::json fields = {{"reason", why},
                           {"kind", full ? "full" : "incremental"},
                           {"chain", chain},
                           {"generation", s.generation},
                           {"bytes", s.bytes_written},
                           {"frozen_seconds", s.frozen_seconds},
                           {"total_seconds", s.total_seconds},
                           {"processes", s.processes},
                           {"pages_written", s.pages_written},
                           {"tracker", s.tracker}};
  if (auto_) auto_->checkpoint_done(s.total_seconds, full);
  replan(fields);
  fields["interval_s"] = period();
  std::string next = period() > 0 ? ", next in " + fixed(period(), 3) + " s" : "";
  if (auto_)
    next += " (auto: C " + fixed(auto_->C(), 3) + " s, R " + fixed(auto_->R(), 3) + " s, MTBF " +
            fixed(auto_->mtbf_s(), 0) + " s)";
  log_.event("checkpoint",
             std::string(full ? "full" : "incremental") + " checkpoint (" + why + "): chain " +
                 std::to_string(chain) + " generation " + std::to_string(s.generation) + ", " +
                 mib(s.bytes_written) + ", frozen " + fixed(s.frozen_seconds, 3) + " s, " +
                 std::to_string(s.processes) + " process" + (s.processes == 1 ? "" : "es") + next,
             fields);
  if (full) prune(write_dir(), state_.schedule.keep);
  for (auto& f : flushers_) f->committed({chain, s.generation});
  return true;
}

void Supervisor::kill_leftovers() {
  // Orphaned members were reparented to us (child subreaper): end them all
  // so their PIDs are free for the restore.
  // The flushers' copies are children too, and not the job's.
  auto job_children = [&] {
    auto kids = my_children();
    kids.erase(std::remove_if(kids.begin(), kids.end(),
                              [&](pid_t k) {
                                return std::any_of(flushers_.begin(), flushers_.end(),
                                                   [k](const auto& f) { return f->child() == k; });
                              }),
               kids.end());
    return kids;
  };
  for (int round = 0; round < 1000; ++round) {
    auto kids = job_children();
    if (kids.empty()) return;
    for (pid_t k : kids) ::kill(k, SIGKILL);
    for (pid_t k : kids) ::waitpid(k, nullptr, WNOHANG | __WALL);
    ::usleep(1000);
  }
}

std::vector<Supervisor::Level> Supervisor::levels() const {
  // The nearest level that holds the newest committed generation first:
  // local, then partner, then shared among those that hold it (the local
  // one is behind, or gone, after the node was lost).
  if (state_.schedule.local_dir.empty()) return {{dir_, "", newest_committed(dir_)}};
  const std::string& local = state_.schedule.local_dir;
  std::vector<Level> out = {{local, "local", newest_committed(local)}};
  if (!state_.schedule.partner.empty()) {
    // Asked briefly: a partner lost with its node (no answer at all) must
    // not hold up a restart from the other levels.
    ckpt::nodes::Partner p = partner();
    p.timeout = 5;
    if (auto h = ckpt::nodes::partner_holds(p); h.ok())
      out.push_back({local, "partner", {h->chain, h->generation}});
    else
      log_.event("warning", "the partner level cannot be asked: " + h.error().message,
                 {{"level", "partner"}, {"message", h.error().message}});
  }
  out.push_back({dir_, "shared", newest_committed(dir_)});
  std::stable_sort(out.begin(), out.end(), [](const Level& a, const Level& b) {
    return std::tie(a.newest.chain, a.newest.generation) >
           std::tie(b.newest.chain, b.newest.generation);
  });
  return out;
}

bool Supervisor::restore_newest(const std::string& why) {
  return restore_newest(why, levels());
}

bool Supervisor::restore_newest(const std::string& why, const std::vector<Level>& ls) {
  // The other level if a restore fails (a damaged or lost local copy).
  bool tried = false;
  for (const Level& level : ls) {
    if (!level.newest.chain) continue;
    // What a failed attempt made (our children: killed, not yet reaped)
    // holds the job's PIDs.
    if (tried) kill_leftovers();
    tried = true;
    if (restore_from(level, why)) return true;
  }
  if (!tried)
    log_.event("restart_failed", "no committed checkpoint to restart from", {{"reason", why}});
  return false;
}

bool Supervisor::restore_from(const Level& level, const std::string& why) {
  const Point p = level.newest;
  const std::string from = level.name.empty() ? "" : " from the " + level.name + " level";
  const double started = now();
  if (level.name == "partner") {
    // Fetched into the local level, where it replaces what is there of that
    // chain (nothing, after a node was lost; a damaged copy otherwise).
    auto got = ckpt::nodes::fetch_from_partner(partner(), p.chain, chain_dir(level.dir, p.chain));
    if (!got.ok() || got->generation < p.generation) {
      const std::string msg = got.ok() ? "it holds fewer generations now" : got.error().message;
      log_.event(
          "restart_failed",
          "fetching chain " + std::to_string(p.chain) + " from the partner level failed: " + msg,
          {{"reason", why}, {"chain", p.chain}, {"level", level.name}, {"message", msg}});
      return false;
    }
  }
  const double fetch_s = now() - started;
  ckpt::RestoreOptions o;
  o.dir = chain_dir(level.dir, p.chain);
  o.generation = p.generation;
  o.log = ckpt::cli::stderr_log("cr_run", false);
  auto r = ckpt::restore_process(o);
  if (!r.ok()) {
    log_.event("restart_failed",
               "restoring chain " + std::to_string(p.chain) + " generation " +
                   std::to_string(p.generation) + from + " failed: " + r.error().message,
               {{"reason", why},
                {"chain", p.chain},
                {"generation", p.generation},
                {"level", level.name},
                {"message", r.error().message}});
    return false;
  }
  // Tracking of the old chain is not continued: the next checkpoint starts
  // a new chain with a full.
  state_.chain = 0;
  state_.stopped = false;
  adopted_.reset();  // the restored root is our child
  if (!level.name.empty()) state_.restore_costs[level.name].add(r->seconds + fetch_s);
  record_root(r->pid);
  nlohmann::json fields = {{"reason", why},
                           {"chain", p.chain},
                           {"generation", p.generation},
                           {"level", level.name},
                           {"pid", r->pid},
                           {"processes", r->processes},
                           {"restore_seconds", r->seconds},
                           {"restarts_used", state_.restarts_used}};
  if (auto_) {
    auto_->restore_done(r->seconds);
    replan(fields);
    fields["interval_s"] = period();
  }
  log_.event("restart",
             "restored chain " + std::to_string(p.chain) + " generation " +
                 std::to_string(p.generation) + from + " (" + why + ") as PID " +
                 std::to_string(r->pid) + ", " + std::to_string(r->processes) + " process" +
                 (r->processes == 1 ? "" : "es") + ", restore " + fixed(r->seconds, 3) + " s",
             fields);
  return true;
}

int Supervisor::finish(int st) {
  kill_leftovers();
  drop_partner_copies();
  state_.finished = true;
  state_.exit_code = exit_code_of(st);
  state_.root = 0;
  save();
  log_.event(
      "exit",
      "job " + describe_status(st) + "; restarts used: " + std::to_string(state_.restarts_used),
      {{"exit_code", state_.exit_code}, {"restarts_used", state_.restarts_used}});
  return state_.exit_code;
}

// The job is gone and is to be restored by --resume. It may run again on
// another node: its newest checkpoint goes to the shared level first.
void Supervisor::record_stopped() {
  for (auto& f : flushers_) f->drain();
  state_.stopped = true;
  state_.root = 0;
  state_.root_start = 0;
  save();
}

// A checkpoint, then the whole job is ended and recorded as stopped, so that
// `--resume` restores it. If the checkpoint fails the job runs on: a stop
// never loses the job.
bool Supervisor::stop(const std::string& why) {
  if (!checkpoint(why)) {
    log_.event("stop_failed", "not stopping (" + why + "): the checkpoint failed; the job runs on",
               {{"reason", why}});
    return false;
  }
  if (adopted_) (void)adopted_->let_go();
  kill_tree(state_.root);
  kill_leftovers();
  adopted_.reset();
  record_stopped();
  log_.event("stop",
             "stopped the job after its checkpoint (" + why + "); cr_run --resume " + dir_ +
                 " restores it",
             {{"reason", why}, {"chain", state_.chain}});
  return true;
}

// The job ended after a forwarded termination signal that does not end it
// for good: recorded as stopped, so that --resume restores the newest
// committed checkpoint (or starts it again if there is none).
int Supervisor::interrupted(int st) {
  kill_leftovers();
  record_stopped();
  const int code = exit_code_of(st);
  log_.event("interrupted",
             "job " + describe_status(st) +
                 " after the termination signal; not finished: --resume restores its newest "
                 "checkpoint",
             {{"exit_code", code}});
  return code;
}

// Seconds until the next scheduled checkpoint or the stop time, whichever
// comes first; negative: none.
double Supervisor::wait_seconds(double next) const {
  double left = period() > 0 ? std::max(0.0, next - now()) : -1;
  if (triggers_.stop_at > 0) {
    const double to_stop = std::max(0.0, triggers_.stop_at - unix_now_seconds());
    left = left < 0 ? to_stop : std::min(left, to_stop);
  }
  for (const auto& f : flushers_)
    if (const double retry = f->retry_in(); retry >= 0)
      left = left < 0 ? retry : std::min(left, retry);
  return left;
}

int Supervisor::loop() {
  double next = period() > 0 ? now() + period() : 0;
  for (;;) {
    int st = 0;
    pid_t w;
    while ((w = ::waitpid(-1, &st, WNOHANG | __WALL)) > 0) {
      if (std::any_of(flushers_.begin(), flushers_.end(),
                      [&](const auto& f) { return f->reaped(w, st); }))
        continue;
      if (w == state_.root && adopted_ && adopted_->resume_from(st)) continue;
      if (w != state_.root) continue;            // an orphaned member, reaped
      if (adopted_) adopted_->end_remembered();  // not our children: kill_leftovers misses them
      log_.event("died", "job " + std::to_string(w) + " " + describe_status(st),
                 {{"pid", w},
                  {"signal", WIFSIGNALED(st) ? WTERMSIG(st) : 0},
                  {"exit_code", WIFEXITED(st) ? WEXITSTATUS(st) : -1}});
      if (terminating_ && !triggers_.termination_ends_job) return interrupted(st);
      if (!WIFSIGNALED(st) || terminating_) return finish(st);
      if (state_.restarts_used >= state_.schedule.restarts) {
        log_.event("restart_failed", "no restarts left (--restarts " +
                                         std::to_string(state_.schedule.restarts) + ")");
        return finish(st);
      }
      kill_leftovers();
      ++state_.restarts_used;
      if (!restore_newest("restart " + std::to_string(state_.restarts_used) + " of " +
                          std::to_string(state_.schedule.restarts)))
        return finish(st);
      next = period() > 0 ? now() + period() : 0;
    }
    if (adopted_ && !adopted_->watching() && !adopted_root_gone()) (void)adopted_->watch();
    if (adopted_ && !adopted_->watching() && adopted_root_gone()) {
      // It ended while cr_run had let go of it for a checkpoint: its status
      // went to its parent. Not restarted (it may have finished).
      log_.event(
          "died",
          "the adopted job " + std::to_string(state_.root) +
              " ended while it was being checkpointed; its exit status is not known here "
              "(cr_run --resume restores it from the newest checkpoint if it did not finish)",
          {{"pid", state_.root}});
      adopted_->end_remembered();
      adopted_.reset();
      return finish(1 << 8);
    }
    for (auto& f : flushers_) f->pump();
    if (triggers_.stop_at > 0 && unix_now_seconds() >= triggers_.stop_at) {
      if (const double later = triggers_.stop_moved ? triggers_.stop_moved() : 0; later > 0) {
        log_.event("stop_moved",
                   "the stop time moved: in " + fixed(later - unix_now_seconds(), 0) + " s");
        triggers_.stop_at = later;
        continue;
      }
      triggers_.stop_at = 0;  // one attempt: a failed stop leaves the job running
      if (stop("the stop time came")) return kStoppedExit;
      continue;
    }
    if (period() > 0 && now() >= next) {
      checkpoint("scheduled");
      next = now() + period();
      continue;
    }
    timespec timeout{};
    timespec* tp = nullptr;
    if (double left = wait_seconds(next); left >= 0) {
      timeout.tv_sec = time_t(left);
      timeout.tv_nsec = long((left - std::floor(left)) * 1e9);
      tp = &timeout;
    }
    siginfo_t info{};
    int sig = ::sigtimedwait(&g_taken, &info, tp);
    if (sig == triggers_.checkpoint_signal) {
      checkpoint(std::string("SIG") + ::sigabbrev_np(sig));
      if (period() > 0) next = now() + period();
    } else if (sig == triggers_.stop_signal) {
      if (stop(std::string("SIG") + ::sigabbrev_np(sig))) return kStoppedExit;
    } else if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
      terminating_ = true;
      log_.event("signal", std::string("forwarding SIG") + ::sigabbrev_np(sig) + " to the job",
                 {{"signal", sig}});
      ::kill(state_.root, sig);
    }
  }
}

int Supervisor::run() {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  start_planning();
  start_levels();
  if (!start_command()) return 1;
  return loop();
}

bool Supervisor::adopt() {
  // The job outlived its launcher and is nobody's child we can wait for: a
  // full checkpoint of it (a new chain the schedule goes on with), then it
  // runs on, watched (cr_run/adopted.hpp). It is not killed to be restored
  // as our child: a job that could not be restored would be lost.
  const uint64_t chain = next_chain(dir_, write_dir());
  ckpt::CheckpointOptions o = job_checkpoint(write_dir(), chain, state_);
  // The dead launcher's checkpointing child may still be letting go of the
  // job (it dies with its parent): EPERM while it is the tracer.
  auto r = checkpoint_isolated(o, true);
  for (int i = 0; i < 50 && !r.ok() && r.error().code == EPERM; ++i) {
    ::usleep(100000);
    r = checkpoint_isolated(o, true);
  }
  if (!r.ok()) {
    std::error_code ec;
    std::filesystem::remove(o.dir, ec);
    log_.event("adopt_failed",
               "cannot take over running job " + std::to_string(o.pid) + ": " + r.error().message,
               {{"pid", o.pid}, {"message", r.error().message}});
    return false;
  }
  log_.event("checkpoint",
             "full checkpoint (adopt): chain " + std::to_string(chain) + " generation " +
                 std::to_string(r->generation) + ", " + mib(r->bytes_written) + ", frozen " +
                 fixed(r->frozen_seconds, 3) + " s, " + std::to_string(r->processes) + " process" +
                 (r->processes == 1 ? "" : "es"),
             {{"reason", "adopt"},
              {"kind", "full"},
              {"chain", chain},
              {"generation", r->generation},
              {"bytes", r->bytes_written},
              {"frozen_seconds", r->frozen_seconds},
              {"processes", r->processes}});
  state_.chain = chain;
  save();
  prune(write_dir(), state_.schedule.keep);
  for (auto& f : flushers_) f->committed({chain, r->generation});
  adopted_.emplace(state_.root);
  if (auto s = adopted_->watch(); !s.ok()) {
    adopted_.reset();
    log_.event("adopt_failed",
               "cannot take over running job " + std::to_string(o.pid) + ": " + s.error().message,
               {{"pid", o.pid}, {"message", s.error().message}});
    return false;
  }
  adopted_->remember_members();
  log_.event("adopt",
             "adopting the running job " + std::to_string(o.pid) +
                 ": it runs on, watched by cr_run (its tracer), and is restarted if it dies",
             {{"pid", o.pid}});
  return true;
}

bool Supervisor::adopted_root_gone() const {
  if (!adopted_) return false;
  std::ifstream in("/proc/" + std::to_string(state_.root) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return true;
  const size_t at = line.rfind(')');
  return at == std::string::npos || line.compare(at, 3, ") Z") == 0 ||
         start_time(state_.root) != state_.root_start;
}

int Supervisor::resume() {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  start_planning();
  start_levels();
  if (state_.finished) {
    log_.event("exit",
               "the job already finished (exit code " + std::to_string(state_.exit_code) + ")",
               {{"exit_code", state_.exit_code}, {"restarts_used", state_.restarts_used}});
    return state_.exit_code;
  }
  const bool alive =
      state_.root > 0 && state_.root_start && start_time(state_.root) == state_.root_start;
  bool ok = false;
  if (alive) {
    ok = adopt();
    if (!ok) return 1;  // the job keeps running as it was
  } else if (const auto ls = levels(); std::any_of(
                 ls.begin(), ls.end(), [](const Level& l) { return l.newest.chain != 0; })) {
    ok = restore_newest(state_.stopped ? "resume after a stop" : "resume: the job is gone", ls);
    if (!ok) return 1;
  } else {
    log_.event("resume", "the job is gone and no checkpoint was committed: starting it again");
    ok = start_command();
    if (!ok) return 1;
  }
  return loop();
}

}  // namespace cr_run
