// cr_migrate --tree: the sending side for a job. Each round is an ordinary
// job checkpoint (job/checkpoint: the code of cr_full --tree / cr_incr) into
// a private directory, whose committed generation is then sent file by file
// (migrate/job_stream). Frozen: one full, taken with every member kept
// frozen; the generation is sent and committed while they stay frozen, and
// they are killed only once the receiver reports the job running (any
// failure releases them untouched). Live: the same, after pre-copy rounds
// (a full, then incrementals of what the members wrote since) taken and
// sent while the job runs; the final incremental is the short stop.
#include <signal.h>
#include <unistd.h>

#include <ckpt/migrate.hpp>
#include <cstdlib>

#include "dump/precopy_rule.hpp"
#include "image/generation_dir.hpp"
#include "image/store.hpp"
#include "job/checkpoint.hpp"
#include "migrate/job_stream.hpp"
#include "migrate/protocol.hpp"
#include "migrate/sender_link.hpp"
#include "migrate/staging.hpp"
#include "migrate/witness.hpp"
#include "proc/freeze.hpp"
#include "proc/tree.hpp"
#include "util/clock.hpp"

namespace ckpt::migrate {

namespace {

// The sender's private chain: $TMPDIR (else /tmp)/ckpt-migrate-PID-XXXXXX,
// removed at the end whatever happened; one left by a killed sender (it
// holds the whole job's memory) is removed by the next job migration.
constexpr const char* kLocalChainPrefix = "ckpt-migrate-";
struct LocalChain {
  Staging s;
  ~LocalChain() {
    if (!s.dir.empty()) remove_staging(s);
  }
};

// After COMMIT: APPLIED of earlier generations may come first, then RUNNING
// (the job's root PID there) or the receiver's ERROR.
Result<pid_t> wait_running(FrameReader& r) {
  Frame f;
  do {
    CKPT_ASSIGN(f, r.next());
  } while (f.type == kApplied);
  if (f.type != kRunning || f.len != 4) return unexpected_frame(f, kRunning, "receiver");
  return pid_t(get_u32(f.data));
}

// Reads the receiver's APPLIED frames up to the one of generation `g`.
Status wait_applied(FrameReader& r, uint64_t g) {
  for (;;) {
    CKPT_ASSIGN(Frame f, r.next());
    if (f.type != kApplied || f.len != 8) return unexpected_frame(f, kApplied, "receiver");
    if (get_u64(f.data) == g) return {};
  }
}

// The members of a generation the job checkpoint wrote (zombies too).
std::vector<pid_t> members_of(const std::string& gen_dir) {
  std::vector<pid_t> out;
  if (auto jm = image::read_job_or_root(gen_dir); jm.ok())
    for (const image::JobMember& m : jm->members) out.push_back(m.pid);
  return out;
}

// A job whose members change during the pre-copy is not moved: the part
// left is not the job that was asked for.
Status same_members(const std::vector<pid_t>& first, const std::vector<pid_t>& now) {
  const std::string change = proc::membership_change(first, now);
  if (change.empty()) return {};
  return make_error(ECHILD, "the job changed during the pre-copy (" + change +
                                "): not migrated; migrate it again once it is stable");
}

}  // namespace

Result<MigrateStats> migrate_job(const MigrateOptions& opts) {
  return migrate_job(opts, JobMigrateHooks{});
}

Result<MigrateStats> migrate_job(const MigrateOptions& opts, const JobMigrateHooks& hooks) {
  const double t0 = now_seconds();
  MigrateStats stats;
  stats.live = opts.live;
  CKPT_ASSIGN(auto link, open_link(opts));
  FrameWriter& w = link->w;
  FrameReader& r = link->r;
  const uint64_t first_gen = link->first_gen;
  CKPT_ASSIGN(auto witness, CommitWitness::start(link->fd.get()));

  const char* tmp = std::getenv("TMPDIR");
  const std::string base = tmp && *tmp ? tmp : "/tmp";
  remove_stale_locked_dirs(base, kLocalChainPrefix);
  LocalChain local;
  CKPT_ASSIGN(local.s, make_locked_dir(base, kLocalChainPrefix));

  CheckpointOptions co;
  co.dir = local.s.dir;
  co.pid = opts.pid;
  co.tree = true;
  co.tcp_established = opts.tcp_established;
  // The local chain only feeds the stream and is removed at the end: no
  // fsync (on a loaded disk the commit's fsync was most of the downtime).
  co.no_sync = true;
  co.tracker = opts.tracker;
  co.progress = opts.progress;
  dump::PrecopyLimits lim;
  lim.threshold_bytes = opts.threshold_bytes;
  lim.diff_bytes = opts.diff_bytes;
  lim.deadline_seconds = opts.deadline_seconds;
  lim.max_rounds = opts.max_rounds;
  auto give_up = [&](const Error& e) -> Error {
    std::string msg = e.message;  // best effort: the receiver learns why
    (void)w.send(kError, msg.data(), std::min<size_t>(msg.size(), 4000));
    return e;
  };
  std::vector<pid_t> first_members;  // live: the job as its first round found it
  for (int round = 1;; ++round) {
    // Whether this round is the last is decided before it starts, from what
    // the previous round found dirty (the job is running, not frozen, here).
    bool final = !opts.live;
    if (opts.live) {
      const uint64_t prev = round > 1 ? stats.rounds.back().dirty_bytes : 0;
      const uint64_t prev2 = round > 2 ? stats.rounds[stats.rounds.size() - 2].dirty_bytes : 0;
      if (const char* why = dump::precopy_stop(lim, round, prev, prev2, now_seconds() - t0)) {
        stats.stop_reason = why;
        final = true;
      }
    }
    co.kill_after = final;
    const double tr = now_seconds();
    const uint64_t sent_before = w.bytes();
    double t_sent = 0, t_running = 0;
    job::CommittedHook send_and_commit = [&](const std::string& gen_dir) -> Status {
      if (round > 1) CKPT_TRY(same_members(first_members, members_of(gen_dir)));
      const uint64_t g = std::stoull(gen_dir.substr(gen_dir.rfind('-') + 1));
      CKPT_TRY(send_job_generation(w, gen_dir, g));
      t_sent = now_seconds();
      if (hooks.before_commit) {
        // The destination holds the generation (and did what it does on
        // receipt: a node agent locks the connections) before the hook.
        CKPT_TRY(wait_applied(r, g));
        CKPT_TRY(hooks.before_commit(gen_dir));
      }
      // From EXITKILL on, the members die with this process; COMMIT comes
      // after it, and a death in between is the witness's to finish, as in
      // cr_migrate (migrate/witness.hpp). A refusal still releases them:
      // the witness is disarmed first, and the detach clears EXITKILL.
      std::vector<std::vector<pid_t>> members;  // each member's threads
      std::vector<pid_t> leaders;
      if (auto jm = image::read_job_or_root(gen_dir); jm.ok())
        for (const image::JobMember& m : jm->members)
          if (!m.zombie())
            if (auto t = proc::task_ids(m.pid); t.ok()) {
              members.push_back(std::move(*t));
              leaders.push_back(m.pid);
            }
      std::vector<uint8_t> p;
      put_u64(p, g);
      CKPT_TRY(witness->arm(g, leaders));
      Status committed;
      for (size_t i = 0; i < members.size() && committed.ok(); ++i)
        committed = proc::die_with_tracer(members[i]);
      if (committed.ok()) committed = w.send(kCommit, p.data(), p.size());
      if (committed.ok()) witness->committed();
      Result<pid_t> running = committed.ok() ? wait_running(r) : Result<pid_t>(committed.error());
      if (!running.ok()) {
        witness->disarm();
        if (hooks.commit_failed) hooks.commit_failed(running.error());
        return running.error();
      }
      stats.remote_pid = *running;
      t_running = now_seconds();
      return {};
    };
    auto res = job::checkpoint_round(co, first_gen, final ? send_and_commit : job::CommittedHook{});
    const double t_back = now_seconds();
    if (!res.ok()) {
      // The job's root gone since the first round: the job ended meanwhile.
      if (round > 1 && ::kill(opts.pid, 0) != 0)
        return give_up(make_error(ESRCH, "the job ended during the pre-copy (its root, PID " +
                                             std::to_string(opts.pid) +
                                             ", exited): nothing was migrated"));
      return give_up(res.error());
    }
    if (!final) {  // a pre-copy round: sent while the job runs
      const std::vector<pid_t> now =
          members_of(image::generation_dir(local.s.dir, res->generation));
      if (round == 1) first_members = now;
      if (Status s = same_members(first_members, now); !s.ok()) return give_up(s.error());
      Status s = send_job_generation(w, image::generation_dir(local.s.dir, res->generation),
                                     res->generation);
      if (!s.ok()) return give_up(s.error());
      t_sent = now_seconds();
      while (r.readable()) {  // the receiver's acknowledgments, not waited for
        CKPT_ASSIGN(Frame f, expect(r, kApplied, "receiver"));
        (void)f;
      }
    }
    stats.tracker = res->tracker;
    stats.processes = res->processes;
    MigrateRound mr;
    mr.generation = res->generation;
    mr.dirty_bytes = res->pages_written * 4096;
    mr.bytes = w.bytes() - sent_before;
    mr.seconds = now_seconds() - tr;
    mr.send_seconds = t_sent ? t_sent - tr : mr.seconds;
    mr.frozen_seconds = res->frozen_seconds;
    stats.rounds.push_back(mr);
    if (final) {
      // Frozen from the final freeze until killed; the job ran there since RUNNING.
      stats.downtime_seconds = res->frozen_seconds - (t_back - t_running);
      break;
    }
  }
  (void)w.send(kDone, nullptr, 0);
  if (!opts.live) stats.stop_reason = "frozen";
  stats.bytes_total = w.bytes();
  stats.migration_seconds = now_seconds() - t0;
  return stats;
}

}  // namespace ckpt::migrate
