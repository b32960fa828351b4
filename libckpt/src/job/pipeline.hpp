// One checkpoint of a job (cr_full, cr_incr, a migration's round, a node's
// part of a coordinated round) as a pipeline of named phases, each a
// method: plan (the chain, the tracker), prepare (trackers and buffers
// while the job runs), precopy (a live checkpoint's rounds), freeze,
// describe (every member, all frozen), capture (memory copied into the
// tool's buffers while the full's tracking is armed), release (the job
// runs again while the files are written), commit (bottom-up digests, the
// generation renamed into place). The state the phases share is this
// object's; an error in any phase returns with the job released untouched
// (in declaration order of the members below: what must be undone first is
// declared last) and no generation visible.
#pragma once

#include <sys/types.h>

#include <array>
#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <ckpt/tracker.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dirty/ledger.hpp"
#include "dirty/tracker.hpp"
#include "dump/capture.hpp"
#include "dump/member.hpp"
#include "dump/precopy.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/writer.hpp"
#include "job/checkpoint.hpp"
#include "job/freeze.hpp"
#include "job/members.hpp"
#include "job/outside_tcp.hpp"
#include "job/previous.hpp"
#include "job/round_hooks.hpp"
#include "util/phase_trace.hpp"

namespace ckpt::job {

struct CheckpointInput {
  const CheckpointOptions& opts;
  const PreviousJob* prev = nullptr;  // an incremental's parent generation
  uint64_t generation = 0;            // the one to write
  double t0 = 0;                      // when the tool started (total_seconds)
  const PreviousJob* hint = nullptr;  // a full: an earlier generation of the job
  CommittedHook committed;            // kill_after: once committed, still frozen
  const RoundHooks* hooks = nullptr;  // a coordinated round's steps
};

class JobCheckpoint {
 public:
  explicit JobCheckpoint(CheckpointInput in);
  // Every phase in order.
  Result<CheckpointStats> run();

 private:
  // The phases.
  Status plan();
  Status prepare();
  Status precopy();
  Status freeze();
  Status describe();
  Status capture();
  Status release();
  Status commit();
  CheckpointStats result();

  // A live checkpoint's rounds: one collected while the process runs (a
  // single process), or one of the frozen job. `stop`: the stop rule chose
  // this round as the last (a frozen round then stays frozen).
  Status running_round(int round, double t_live, uint64_t* prev_bytes, bool* stop);
  Status frozen_round(int round, double t_live, uint64_t* prev_bytes, bool* stop);

  // What the chain knows of the process `pid`, as a member of the frozen
  // job (`i` its index), or running on its own (a pre-copy round's collect).
  dump::MemberSpec chain_spec(pid_t pid);
  dump::MemberSpec member_spec(size_t i, const std::vector<pid_t>& pids,
                               const SharedOwners& owners);
  dump::MemberSpec running_spec(pid_t pid);
  // The member's files in the generation, made on first use.
  Result<image::SnapshotWriter*> writer_for(pid_t pid);
  // The writers of members that left since a pre-copy round made them.
  void drop_writers_of_gone();
  // A full that fails after it armed tracking (its live rounds', or the arm
  // after the copy) takes it back while the job is still frozen: the job is
  // left as it was found.
  Error undo_arms(Error e);

  const CheckpointInput in_;
  const CheckpointOptions& opts_;
  PhaseTrace trace_;
  CheckpointStats stats_;
  std::string tracker_;
  const TrackerInfo* tracker_info_ = nullptr;
  std::array<uint8_t, 16> chain_id_{};
  // An incremental's trackers after their work while the job ran.
  std::map<pid_t, std::shared_ptr<dirty::Tracker>> ready_;
  // The generation being written, and each member's files in it (a live
  // checkpoint fills them before the final freeze).
  std::unique_ptr<image::GenerationWriter> gen_;
  std::map<pid_t, std::unique_ptr<image::SnapshotWriter>> member_writers_;
  std::unique_ptr<dump::Capture> capture_;
  // What the final copy is expected to take (buffers faulted in for it).
  uint64_t expected_ = 0;
  // The trackers' side state waits in memory until the job runs again
  // (declared before `frozen_`: on an early return the job is released first).
  dirty::LedgerHold hints_;
  std::unique_ptr<FrozenJob> frozen_;
  double t_frozen_ = 0, t_released_ = 0;
  std::map<pid_t, std::unique_ptr<dump::Precopy>> precopies_;
  std::vector<pid_t> first_members_;  // live: the job at its first pre-copy round
  std::vector<pid_t> pids_;           // the frozen job's members
  SharedOwners owners_;
  OutsideTcp outside_;  // --tcp-established: held back until the job runs (or is restored)
  std::vector<std::unique_ptr<dump::MemberDump>> dumps_;
  std::vector<dump::MemberDump*> live_;  // the members that are not zombies, in job order
  image::JobMeta jm_;
  std::vector<image::SnapshotWriter*> writers_;  // live_'s, in the same order
  double t_mem_ = 0;
};

}  // namespace ckpt::job
