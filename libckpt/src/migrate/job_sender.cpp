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

// One job migration: the link, the private chain, and a round per
// checkpoint (pre-copy rounds sent while the job runs, then the final one,
// sent and committed while it is frozen).
class JobMigration {
 public:
  JobMigration(const MigrateOptions& opts, const JobMigrateHooks& hooks)
      : opts_(opts), hooks_(hooks) {}

  Result<MigrateStats> run() {
    t0_ = now_seconds();
    stats_.live = opts_.live;
    CKPT_ASSIGN(link_, open_link(opts_));
    CKPT_ASSIGN(witness_, CommitWitness::start(link_->fd.get()));
    CKPT_TRY(make_local_chain());
    for (int round = 1;; ++round) {
      CKPT_ASSIGN(bool done, one_round(round));
      if (done) break;
    }
    (void)link_->w.send(kDone, nullptr, 0);
    if (!opts_.live) stats_.stop_reason = "frozen";
    stats_.bytes_total = link_->w.bytes();
    stats_.migration_seconds = now_seconds() - t0_;
    return stats_;
  }

 private:
  Status make_local_chain() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string base = tmp && *tmp ? tmp : "/tmp";
    remove_stale_locked_dirs(base, kLocalChainPrefix);
    CKPT_ASSIGN(local_.s, make_locked_dir(base, kLocalChainPrefix));
    co_.dir = local_.s.dir;
    co_.pid = opts_.pid;
    co_.tree = true;
    co_.tcp_established = opts_.tcp_established;
    // The local chain only feeds the stream and is removed at the end: no
    // fsync (on a loaded disk the commit's fsync was most of the downtime).
    co_.no_sync = true;
    co_.tracker = opts_.tracker;
    co_.progress = opts_.progress;
    return {};
  }

  // Whether round `round` is the last, decided before it starts from what
  // the previous rounds found dirty (the job is running, not frozen, here).
  bool is_final(int round) {
    if (!opts_.live) return true;
    const auto& rounds = stats_.rounds;
    const uint64_t prev = round > 1 ? rounds.back().dirty_bytes : 0;
    const uint64_t prev2 = round > 2 ? rounds[rounds.size() - 2].dirty_bytes : 0;
    const char* why =
        dump::precopy_stop(precopy_limits(opts_), round, prev, prev2, now_seconds() - t0_);
    if (!why) return false;
    stats_.stop_reason = why;
    return true;
  }

  // Checkpoints and sends one round; true once the final one is committed.
  Result<bool> one_round(int round) {
    const bool final = is_final(round);
    co_.kill_after = final;
    const double tr = now_seconds();
    const uint64_t sent_before = link_->w.bytes();
    t_sent_ = t_running_ = 0;
    job::CommittedHook on_commit = [&](const std::string& gen_dir) -> Status {
      if (round > 1) CKPT_TRY(same_members(first_members_, members_of(gen_dir)));
      return send_and_commit(gen_dir);
    };
    auto res =
        job::checkpoint_round(co_, link_->first_gen, final ? on_commit : job::CommittedHook{});
    const double t_back = now_seconds();
    if (!res.ok()) {
      // The job's root gone since the first round: the job ended meanwhile.
      if (round > 1 && ::kill(opts_.pid, 0) != 0)
        return give_up(make_error(ESRCH, "the job ended during the pre-copy (its root, PID " +
                                             std::to_string(opts_.pid) +
                                             ", exited): nothing was migrated"));
      return give_up(res.error());
    }
    if (!final) CKPT_TRY(send_precopy(round, res->generation));
    stats_.tracker = res->tracker;
    stats_.processes = res->processes;
    MigrateRound mr;
    mr.generation = res->generation;
    mr.dirty_bytes = res->pages_written * 4096;
    mr.bytes = link_->w.bytes() - sent_before;
    mr.seconds = now_seconds() - tr;
    mr.send_seconds = t_sent_ ? t_sent_ - tr : mr.seconds;
    mr.frozen_seconds = res->frozen_seconds;
    stats_.rounds.push_back(mr);
    // Frozen from the final freeze until killed; the job ran there since RUNNING.
    if (final) stats_.downtime_seconds = res->frozen_seconds - (t_back - t_running_);
    return final;
  }

  // A pre-copy round's generation, sent while the job runs.
  Status send_precopy(int round, uint64_t generation) {
    const std::string gen_dir = image::generation_dir(local_.s.dir, generation);
    const std::vector<pid_t> now = members_of(gen_dir);
    if (round == 1) first_members_ = now;
    if (Status s = same_members(first_members_, now); !s.ok()) return give_up(s.error());
    if (Status s = send_job_generation(link_->w, gen_dir, generation); !s.ok())
      return give_up(s.error());
    t_sent_ = now_seconds();
    while (link_->r.readable()) {  // the receiver's acknowledgments, not waited for
      CKPT_ASSIGN(Frame f, expect(link_->r, kApplied, "receiver"));
      (void)f;
    }
    return {};
  }

  // The final generation (the job frozen): sent, committed, and the job
  // running at the destination before its members here are killed.
  Status send_and_commit(const std::string& gen_dir) {
    const uint64_t g = std::stoull(gen_dir.substr(gen_dir.rfind('-') + 1));
    CKPT_TRY(send_job_generation(link_->w, gen_dir, g));
    t_sent_ = now_seconds();
    if (hooks_.before_commit) {
      // The destination holds the generation (and did what it does on
      // receipt: a node agent locks the connections) before the hook.
      CKPT_TRY(wait_applied(link_->r, g));
      CKPT_TRY(hooks_.before_commit(gen_dir));
    }
    std::vector<std::vector<pid_t>> members;  // each member's threads
    CKPT_TRY(arm_witness(gen_dir, g, &members));
    Result<pid_t> running = commit(members, g);
    if (!running.ok()) {
      witness_->disarm();
      if (hooks_.commit_failed) hooks_.commit_failed(running.error());
      return running.error();
    }
    stats_.remote_pid = *running;
    t_running_ = now_seconds();
    return {};
  }

  // Arms the witness for generation `g` with the members' leaders; their
  // threads go to *members.
  Status arm_witness(const std::string& gen_dir, uint64_t g,
                     std::vector<std::vector<pid_t>>* members) {
    std::vector<pid_t> leaders;
    if (auto jm = image::read_job_or_root(gen_dir); jm.ok())
      for (const image::JobMember& m : jm->members)
        if (!m.zombie())
          if (auto t = proc::task_ids(m.pid); t.ok()) {
            members->push_back(std::move(*t));
            leaders.push_back(m.pid);
          }
    return witness_->arm(g, leaders);
  }

  // From EXITKILL on, the members die with this process; COMMIT comes after
  // it, and a death in between is the witness's to finish, as in cr_migrate
  // (migrate/witness.hpp). A refusal still releases them: the caller
  // disarms the witness first, and the detach clears EXITKILL.
  Result<pid_t> commit(const std::vector<std::vector<pid_t>>& members, uint64_t g) {
    for (const std::vector<pid_t>& threads : members) CKPT_TRY(proc::die_with_tracer(threads));
    std::vector<uint8_t> p;
    put_u64(p, g);
    CKPT_TRY(link_->w.send(kCommit, p.data(), p.size()));
    witness_->committed();
    return wait_running(link_->r);
  }

  // Tells the receiver why (best effort) and returns the error.
  Error give_up(const Error& e) {
    const std::string& msg = e.message;
    (void)link_->w.send(kError, msg.data(), std::min<size_t>(msg.size(), 4000));
    return e;
  }

  const MigrateOptions& opts_;
  const JobMigrateHooks& hooks_;
  double t0_ = 0, t_sent_ = 0, t_running_ = 0;
  MigrateStats stats_;
  std::unique_ptr<SenderLink> link_;
  std::unique_ptr<CommitWitness> witness_;
  LocalChain local_;
  CheckpointOptions co_;
  std::vector<pid_t> first_members_;  // live: the job as its first round found it
};

}  // namespace

Result<MigrateStats> migrate_job(const MigrateOptions& opts) {
  return migrate_job(opts, JobMigrateHooks{});
}

Result<MigrateStats> migrate_job(const MigrateOptions& opts, const JobMigrateHooks& hooks) {
  return JobMigration(opts, hooks).run();
}

}  // namespace ckpt::migrate
