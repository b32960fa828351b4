#include "job/pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <thread>

#include "dump/chain_owner.hpp"
#include "dump/generation.hpp"
#include "dump/precopy_rule.hpp"
#include "dump/vma_flags.hpp"
#include "image/page_codec.hpp"
#include "image/store.hpp"
#include "sockets/tcp_settle.hpp"
#include "util/clock.hpp"

namespace ckpt::job {

namespace {

// Threads that compress page runs (CheckpointOptions::compress_level): the
// capture's writer thread and up to 3 more, never more than the CPUs.
unsigned compress_threads() {
  return std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
}

}  // namespace

JobCheckpoint::JobCheckpoint(CheckpointInput in)
    : in_(std::move(in)), opts_(in_.opts), trace_("final", &in_.opts.log) {}

Result<CheckpointStats> JobCheckpoint::run() {
  CKPT_TRY(plan());
  CKPT_TRY(prepare());
  CKPT_TRY(precopy());
  CKPT_TRY(freeze());
  CKPT_TRY(describe());
  CKPT_TRY(capture());
  CKPT_TRY(release());
  CKPT_TRY(commit());
  return result();
}

// The chain (a new one for a full), its tracker, the generation's directory
// and the capture buffers. A tracker's self-test (pagemap-scan:
// milliseconds) and the VMA-flags program's load run now, not in the freeze
// where their first use would.
Status JobCheckpoint::plan() {
  if (opts_.compress_level < 0 || opts_.compress_level > image::kMaxCompressLevel)
    return make_error(EINVAL, "compression level " + std::to_string(opts_.compress_level) +
                                  " is not 0 (off) or 1 to " +
                                  std::to_string(image::kMaxCompressLevel));
  const image::ImageMeta* prev_root = in_.prev ? &in_.prev->root()->meta() : nullptr;
  CKPT_ASSIGN(tracker_, dump::chain_tracker(opts_, prev_root));
  tracker_info_ = find_tracker(tracker_);
  if (!tracker_info_) return make_error(EINVAL, "unknown tracker " + tracker_);
  (void)dirty::probe_tracker(tracker_info_->kind);
  (void)dump::vma_flags_available();
  if (prev_root)
    chain_id_ = prev_root->chain_id;
  else
    CKPT_TRY(dump::new_chain_id(&chain_id_));
  CKPT_ASSIGN(gen_, image::GenerationWriter::create(opts_.dir, in_.generation));
  capture_ = std::make_unique<dump::Capture>(
      opts_.capture_bytes >= 0 ? uint64_t(opts_.capture_bytes) : dump::default_capture_budget(),
      opts_.capture);
  return {};
}

// While the job runs: what keeps the (first) collect small
// (dirty::Tracker::before_freeze), and the capture buffers for what the
// final copy is expected to take, faulted in now (see
// dump::capture_prefault_bytes): what the parent incremental copied (its
// non-zero runs, uncompressed) or what reads as written already, the
// larger. A live checkpoint's final copy is only what its last round leaves.
Status JobCheckpoint::prepare() {
  const PreviousJob* prev = in_.prev;
  if (prev && prev->root()->meta().parent_generation != 0)
    for (const auto& [pid, r] : prev->members)
      for (const image::PageRun& run : r->runs())
        if (!run.zero()) expected_ += run.bytes();
  if (prev) {
    PhaseTrace pv("before freeze", &opts_.log);
    uint64_t written = 0;
    for (const auto& member : prev->members) {
      uint64_t w = 0;
      ready_[member.first] =
          dump::prepare_tracker(running_spec(member.first), opts_.live ? nullptr : &w);
      written += w;
    }
    expected_ = std::max(expected_, written);
    pv.mark("trackers");
  }
  // A full copies the whole process, and so does every generation of the
  // hash tracker (it compares after the copy): the writer recycles their
  // buffers (dump::kFullCopy). A live one's rounds fault buffers in as they go.
  if ((!prev || !tracker_info_->kernel) && !opts_.live) expected_ = dump::kFullCopy;
  PhaseTrace pf("before freeze", &opts_.log);
  capture_->prefault(dump::capture_prefault_bytes(opts_.pid, expected_));
  pf.mark("buffers");
  return {};
}

// Pre-copy rounds while the job runs (dump/precopy) until the stop rule
// picks one; a frozen round it picks stays frozen and becomes the final one.
// Rounds after the arm collect while the process runs (a single process: a
// tree's membership is only known frozen); the final round freezes it only
// for a collect of what it wrote since the last one.
Status JobCheckpoint::precopy() {
  if (!opts_.live) return {};
  if (!tracker_info_->kernel) {
    stats_.live_stop = "the hash tracker cannot pre-copy: pages copied into memory while frozen";
    return {};
  }
  const double t_live = now_seconds();
  uint64_t prev_bytes = 0;
  const bool running_rounds = !opts_.tree;
  for (int round = 1;; ++round) {
    bool stop = false;
    if (running_rounds && (in_.prev || round > 1))
      CKPT_TRY(running_round(round, t_live, &prev_bytes, &stop));
    else
      CKPT_TRY(frozen_round(round, t_live, &prev_bytes, &stop));
    if (stop) return {};
  }
}

Status JobCheckpoint::running_round(int round, double t_live, uint64_t* prev_bytes, bool* stop) {
  PhaseTrace pt("round (running)", &opts_.log);
  std::unique_ptr<dump::Precopy>& pc = precopies_[opts_.pid];
  if (!pc) pc = std::make_unique<dump::Precopy>();
  CKPT_TRY(pc->plan_round(running_spec(opts_.pid), &stats_));
  const uint64_t bytes = pc->round_bytes();
  pt.mark("collect+plan");
  if (const char* why = dump::precopy_stop(dump::PrecopyLimits{}, round, bytes, *prev_bytes,
                                           now_seconds() - t_live)) {
    stats_.live_stop = why;
    pc->collected_now = false;  // the process ran since: the final round collects
    *stop = true;
    return {};
  }
  CKPT_ASSIGN(image::SnapshotWriter * w, writer_for(opts_.pid));
  CKPT_TRY(pc->copy(*w));
  pt.mark("copy");
  stats_.live_rounds = uint64_t(round);
  stats_.precopy_bytes += bytes;
  *prev_bytes = bytes;
  return {};
}

Status JobCheckpoint::frozen_round(int round, double t_live, uint64_t* prev_bytes, bool* stop) {
  t_frozen_ = now_seconds();
  PhaseTrace pt("round", &opts_.log);
  CKPT_ASSIGN(frozen_, FrozenJob::freeze(opts_.pid, opts_.tree));
  pt.mark("freeze");
  const std::vector<proc::Member>& ms = frozen_->members();
  std::vector<pid_t> pids;
  for (const proc::Member& m : ms) pids.push_back(m.pid);
  const SharedOwners owners = shared_memory_owners(ms);
  std::map<pid_t, std::unique_ptr<dump::Precopy>> now;
  uint64_t bytes = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ms[i].zombie) continue;
    auto pc = precopies_.count(ms[i].pid) ? std::move(precopies_[ms[i].pid])
                                          : std::make_unique<dump::Precopy>();
    Status s = pc->plan_round(member_spec(i, pids, owners), &stats_);
    if (!s.ok()) return proc::name_member(s.error(), ms[i].pid, ms.size());
    bytes += pc->round_bytes();
    now[ms[i].pid] = std::move(pc);
  }
  pt.mark("plan (collect)");
  if (round == 1) first_members_ = pids;
  precopies_ = std::move(now);  // members gone since the last round are dropped
  for (auto it = member_writers_.begin(); it != member_writers_.end();)
    it = precopies_.count(it->first) ? std::next(it) : member_writers_.erase(it);
  if (const char* why = dump::precopy_stop(dump::PrecopyLimits{}, round, bytes, *prev_bytes,
                                           now_seconds() - t_live)) {
    stats_.live_stop = why;
    *stop = true;
    return {};
  }
  CKPT_TRY(frozen_->release());
  stats_.precopy_frozen_max_seconds =
      std::max(stats_.precopy_frozen_max_seconds, now_seconds() - t_frozen_);
  frozen_.reset();
  hints_.write();
  bytes = 0;  // round 1 of a full plans its pages in copy()
  for (auto& [pid, pc] : precopies_) {
    CKPT_ASSIGN(image::SnapshotWriter * w, writer_for(pid));
    if (Status s = pc->copy(*w); !s.ok())
      return proc::name_member(s.error(), pid, precopies_.size());
    bytes += pc->round_bytes();
  }
  stats_.live_rounds = uint64_t(round);
  stats_.precopy_bytes += bytes;
  *prev_bytes = bytes;
  return {};
}

// The final freeze (unless a live round's is still on), the owners of the
// shared memory, the connections to peers outside the job held back.
Status JobCheckpoint::freeze() {
  trace_ = PhaseTrace("final", &opts_.log);
  if (!frozen_) {
    t_frozen_ = now_seconds();
    CKPT_ASSIGN(frozen_, FrozenJob::freeze(opts_.pid, opts_.tree));
    trace_.mark("freeze");
  }
  for (const proc::Member& m : frozen_->members()) pids_.push_back(m.pid);
  if (!first_members_.empty())
    stats_.members_changed = proc::membership_change(first_members_, pids_);
  owners_ = shared_memory_owners(frozen_->members());
  trace_.mark("shared owners");
  if (opts_.tcp_established) CKPT_TRY(outside_.lock(pids_));
  if (in_.hooks && in_.hooks->frozen) CKPT_TRY(in_.hooks->frozen());
  return {};
}

// Every member described and its memory planned, all frozen; job.img's
// content. Loopback data between the members may still be on its way: the
// connections are read once it has arrived (sockets/tcp_settle.hpp).
Status JobCheckpoint::describe() {
  const std::vector<proc::Member>& members = frozen_->members();
  if (Status s = sockets::settle_job_tcp(pids_); !s.ok()) return undo_arms(s.error());
  trace_.mark("tcp settled");
  dump::ScratchSaved scratch_saved;  // a tmpfs file held by several members is read once
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].zombie) continue;
    const pid_t pid = members[i].pid;
    dump::MemberSpec ms = member_spec(i, pids_, owners_);
    ms.scratch_saved = &scratch_saved;
    if (precopies_.count(pid)) ms.precopy = precopies_[pid].get();
    auto md = std::make_unique<dump::MemberDump>();
    Status s = md->prepare(ms, &stats_);
    dumps_.push_back(std::move(md));
    if (!s.ok()) return undo_arms(proc::name_member(s.error(), pid, members.size()));
    live_.push_back(dumps_.back().get());
  }
  if (Status s = check_terminals(members, live_); !s.ok()) return undo_arms(s.error());
  drop_writers_of_gone();
  jm_ = job_meta(members, opts_.tree, in_.generation, chain_id_);
  jm_.shares = find_shared_files(live_);
  trace_.mark("describe+plan");
  return {};
}

// Each member's pages copied into buffers the tool owns (dump/capture) and
// drained into its own files by a writer thread, with progress over the
// whole job. The copy runs on a second thread while this one, the tracer,
// arms each full's tracking (write-protecting every page: about as long as
// the copy). Both only while frozen: the copy reads pages, the arm marks
// them, neither changes what the other sees.
Status JobCheckpoint::capture() {
  const size_t n = frozen_->members().size();
  uint64_t total = 0;
  for (auto* d : live_) total += d->plan.bytes();
  std::vector<dump::PageSink> sinks;
  t_mem_ = now_seconds();
  for (auto* d : live_) {
    CKPT_ASSIGN(image::SnapshotWriter * w, writer_for(d->pid()));
    writers_.push_back(w);
    auto sink = d->capture_sink(*w);
    if (!sink.ok()) return undo_arms(proc::name_member(sink.error(), d->pid(), n));
    sinks.push_back(std::move(*sink));
  }
  size_t failed_member = live_.size();
  auto copy = std::async(std::launch::async, [&]() -> Status {
    uint64_t done = 0;
    for (size_t k = 0; k < live_.size(); ++k) {
      Status s = capture_->read(live_[k]->pid(), live_[k]->plan, std::move(sinks[k]),
                                opts_.progress, done, total);
      if (!s.ok()) {
        failed_member = k;
        return s;
      }
      done += live_[k]->plan.bytes();
    }
    return {};
  });
  Status armed;
  pid_t arm_failed = 0;
  for (auto* d : live_)
    if (armed = d->captured(!opts_.kill_after); !armed.ok()) {
      arm_failed = d->pid();
      break;
    }
  while (copy.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready)
    capture_->report();  // on this thread, as ckpt.h promises
  Status copied = copy.get();
  if (!copied.ok())
    return undo_arms(proc::name_member(copied.error(), live_[failed_member]->pid(), n));
  if (!armed.ok()) return undo_arms(proc::name_member(armed.error(), arm_failed, n));
  trace_.mark("copy+arm");
  return {};
}

// Memory is copied: a running job cannot change the image any more, so it
// goes back to work while the files are written and made durable. With
// kill_after it stays stopped until the checkpoint is committed.
Status JobCheckpoint::release() {
  if (in_.hooks && in_.hooks->captured)
    if (Status s = in_.hooks->captured(); !s.ok()) return undo_arms(s.error());
  if (!opts_.kill_after) {
    CKPT_TRY(frozen_->release());
    outside_.unlock();
    t_released_ = now_seconds();
    trace_.mark("release");
    hints_.write();
  }
  capture_->resume();
  CKPT_TRY(capture_->finish());
  for (auto* d : live_) d->finish_write();
  stats_.memory_seconds = now_seconds() - t_mem_;
  stats_.capture_peak_bytes = capture_->peak_bytes();
  trace_.mark("write (after release)");
  return {};
}

// Bound bottom-up (docs/format.md): job.img holds the other members'
// meta.img digests, and the root's meta.img (live_[0], written last) the
// digest of job.img, so the root's digest covers every file of the
// generation. With kill_after the job is still frozen: a migration sends
// the generation now, and the job lives on untouched if that fails
// (job/checkpoint.hpp).
Status JobCheckpoint::commit() {
  for (size_t i = 1; i < live_.size(); ++i) {
    CKPT_TRY(writers_[i]->commit(live_[i]->meta));
    for (image::JobMember& m : jm_.members)
      if (m.pid == live_[i]->pid()) m.meta_digest = writers_[i]->meta_digest();
  }
  live_[0]->meta.link.binds_job = true;
  CKPT_TRY(
      image::write_job_file(gen_->path(), jm_, !opts_.no_sync, &live_[0]->meta.link.job_digest));
  CKPT_TRY(writers_[0]->commit(live_[0]->meta));
  if (in_.hooks && in_.hooks->written) CKPT_TRY(in_.hooks->written());
  CKPT_TRY(gen_->commit(!opts_.no_sync));
  trace_.mark("commit");
  if (!opts_.kill_after) return {};
  if (in_.committed)
    if (Status s = in_.committed(image::generation_dir(opts_.dir, in_.generation)); !s.ok()) {
      (void)frozen_->release();
      return s.error();
    }
  const Status parked = outside_.park(live_, opts_.tcp_established);  // closed silently by the kill
  CKPT_TRY(frozen_->kill());
  t_released_ = now_seconds();
  if (!parked.ok())
    return make_error(parked.error().code,
                      "the checkpoint is committed, but its peers may have seen the end of "
                      "their connections: " +
                          parked.error().message);
  return {};
}

CheckpointStats JobCheckpoint::result() {
  stats_.generation = in_.generation;
  stats_.parent_generation = in_.prev ? in_.prev->job.generation : 0;
  stats_.tracker = tracker_;
  stats_.processes = frozen_->members().size();
  stats_.frozen_seconds = t_released_ - t_frozen_;
  for (size_t i = 0; i < live_.size(); ++i)
    dump::add_member_stats(*live_[i], *writers_[i], &stats_);
  stats_.total_seconds = now_seconds() - in_.t0;
  return stats_;
}

dump::MemberSpec JobCheckpoint::chain_spec(pid_t pid) {
  const PreviousJob* prev = in_.prev;
  dump::MemberSpec ms;
  ms.record_hashes = !prev && !opts_.live;
  if (ready_.count(pid)) ms.ready_tracker = ready_.at(pid);
  if (prev && prev->members.count(pid)) {
    const image::SnapshotReader* r = prev->members.at(pid).get();
    ms.prev = &r->meta();
    ms.prev_hashes = &r->page_hashes();
    ms.prev_digest = r->meta_digest();
  }
  if (in_.hint && in_.hint->members.count(pid)) ms.hint = &in_.hint->members.at(pid)->meta();
  ms.tracker = tracker_;
  ms.tracking = opts_.tracking;
  ms.log = &opts_.log;
  ms.generation = in_.generation;
  ms.chain_id = chain_id_;
  return ms;
}

dump::MemberSpec JobCheckpoint::member_spec(size_t i, const std::vector<pid_t>& pids,
                                            const SharedOwners& owners) {
  const pid_t pid = frozen_->members()[i].pid;
  dump::MemberSpec ms = chain_spec(pid);
  ms.fp = frozen_->process(i);
  ms.job = pids;
  ms.tcp_established = opts_.tcp_established;
  ms.scratch_max_bytes = opts_.scratch_max_bytes;
  ms.saves_shared = [&owners, pid](const image::SharedObject& o) {
    auto it = owners.find(o);
    return it == owners.end() || it->second == pid;
  };
  return ms;
}

dump::MemberSpec JobCheckpoint::running_spec(pid_t pid) {
  dump::MemberSpec ms = chain_spec(pid);
  ms.pid = pid;
  ms.job = {pid};
  ms.saves_shared = [](const image::SharedObject&) { return true; };
  return ms;
}

Result<image::SnapshotWriter*> JobCheckpoint::writer_for(pid_t pid) {
  auto& w = member_writers_[pid];
  if (!w) {
    auto r = image::SnapshotWriter::create_in(image::member_dir(gen_->path(), pid, opts_.pid),
                                              in_.generation, chain_id_, opts_.direct_io);
    if (!r.ok()) return r.error();
    w = std::move(*r);
    w->set_durable(!opts_.no_sync);
    w->set_compression(opts_.compress_level, compress_threads());
  }
  return w.get();
}

void JobCheckpoint::drop_writers_of_gone() {
  const std::vector<proc::Member>& members = frozen_->members();
  for (auto it = member_writers_.begin(); it != member_writers_.end();)
    it = precopies_.count(it->first) && frozen_has(members, it->first) ? std::next(it)
                                                                       : member_writers_.erase(it);
}

Error JobCheckpoint::undo_arms(Error e) {
  if (in_.prev) return e;
  for (auto& [pid, pc] : precopies_)
    if (pc && pc->tracker) (void)pc->tracker->release(pid, pc->tstate);
  for (auto& d : dumps_) d->disarm();
  return e;
}

}  // namespace ckpt::job
