// cr_full / cr_incr: a job (one process, or a process tree) frozen as a
// whole, each member described and its memory copied into its own three
// files, every member released together, then one generation committed.
#include <linux/kcmp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ckpt/ckpt.hpp>
#include <ckpt/tracker.hpp>
#include <cstdlib>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "dirty/ledger.hpp"
#include "dump/arena.hpp"
#include "dump/capture.hpp"
#include "dump/chain_owner.hpp"
#include "dump/collect.hpp"
#include "dump/generation.hpp"
#include "dump/member.hpp"
#include "dump/precopy_rule.hpp"
#include "dump/vma_flags.hpp"
#include "image/chain_link.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/page_codec.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "job/checkpoint.hpp"
#include "job/freeze.hpp"
#include "job/outside_tcp.hpp"
#include "job/round_hooks.hpp"
#include "proc/maps.hpp"
#include "sockets/tcp_settle.hpp"
#include "tty/pty.hpp"
#include "util/clock.hpp"
#include "util/phase_trace.hpp"

namespace ckpt {

namespace {

// The previous generation of the chain, member by member.
struct PreviousJob {
  image::JobMeta job;
  std::map<pid_t, std::unique_ptr<image::SnapshotReader>> members;
  const image::SnapshotReader* root() const { return members.at(job.members[0].pid).get(); }
};

Result<PreviousJob> open_previous(const std::string& gen_dir) {
  PreviousJob p;
  CKPT_ASSIGN(p.job, image::read_job_or_root(gen_dir));
  const pid_t root = p.job.members[0].pid;
  for (const image::JobMember& m : p.job.members) {
    if (m.zombie()) continue;
    CKPT_ASSIGN(auto r, image::SnapshotReader::open(image::member_dir(gen_dir, m.pid, root)));
    p.members.emplace(m.pid, std::move(r));
  }
  // An incremental continues what the generation binds, as a restore reads it.
  const image::SnapshotReader& top = *p.root();
  CKPT_TRY(image::check_job_link(top, p.job));
  for (const image::JobMember& m : p.job.members)
    if (!m.zombie() && m.pid != root)
      CKPT_TRY(image::check_member_link(*p.members.at(m.pid), m, top.meta().link.binds_job));
  return p;
}

bool frozen_has(const std::vector<proc::Member>& members, pid_t pid) {
  for (const proc::Member& m : members)
    if (m.pid == pid && !m.zombie) return true;
  return false;
}

// Shared memory objects (shared anonymous memory, SysV segments, deleted
// files mapped shared) and the first member mapping each: that member saves
// the content, the others only map it.
using SharedOwners = std::map<image::SharedObject, pid_t>;
SharedOwners shared_memory_owners(const std::vector<proc::Member>& members) {
  SharedOwners owner;
  for (const proc::Member& m : members) {
    if (m.zombie) continue;
    auto maps = proc::read_maps(m.pid);
    if (!maps.ok()) continue;  // the member's describe step reports it
    for (const proc::MapEntry& e : *maps)
      if (auto o = dump::shared_object_of(e)) owner.emplace(*o, m.pid);
  }
  return owner;
}

// The job's ptys that are controlling terminals must come back as such: their
// session leaders and foreground groups must be members.
Status check_terminals(const std::vector<proc::Member>& members,
                       const std::vector<dump::MemberDump*>& dumps) {
  std::vector<const image::ImageMeta*> metas;
  for (const dump::MemberDump* d : dumps) metas.push_back(&d->meta);
  std::vector<tty::SessionMember> in_job;
  for (const proc::Member& m : members) in_job.push_back({m.pid, m.pgid, m.sid});
  for (const tty::Controlling& c : tty::controlling_ttys(metas))
    CKPT_TRY(tty::check_controlling(c, in_job));
  return {};
}

// Descriptors of a member that are the same open file description as one of
// an earlier member (inherited at fork, or passed): kcmp across processes.
std::vector<image::JobShare> find_shared_files(const std::vector<dump::MemberDump*>& dumps) {
  std::vector<image::JobShare> out;
  for (size_t b = 1; b < dumps.size(); ++b)
    for (const image::FileRecord& fb : dumps[b]->meta.files) {
      if (fb.dup_of != -1 || fb.kind == image::FileKind::kInheritStdio) continue;
      bool found = false;
      for (size_t a = 0; a < b && !found; ++a)
        for (const image::FileRecord& fa : dumps[a]->meta.files) {
          if (fa.dup_of != -1 || fa.dev != fb.dev || fa.ino != fb.ino) continue;
          if (::syscall(SYS_kcmp, dumps[a]->pid(), dumps[b]->pid(), KCMP_FILE, fa.fd, fb.fd) == 0) {
            out.push_back({dumps[b]->pid(), fb.fd, dumps[a]->pid(), fa.fd});
            found = true;
            break;
          }
        }
    }
  return out;
}

// Threads that compress page runs (CheckpointOptions::compress_level): the
// capture's writer thread and up to 3 more, never more than the CPUs.
unsigned compress_threads() {
  return std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
}

Result<CheckpointStats> checkpoint_job(const CheckpointOptions& opts, const PreviousJob* prev,
                                       uint64_t generation, double t0,
                                       const PreviousJob* hint = nullptr,
                                       const job::CommittedHook& committed = {},
                                       const job::RoundHooks* hooks = nullptr) {
  CheckpointStats stats;
  if (opts.compress_level < 0 || opts.compress_level > image::kMaxCompressLevel)
    return make_error(EINVAL, "compression level " + std::to_string(opts.compress_level) +
                                  " is not 0 (off) or 1 to " +
                                  std::to_string(image::kMaxCompressLevel));
  const image::ImageMeta* prev_root = prev ? &prev->root()->meta() : nullptr;
  CKPT_ASSIGN(std::string tracker, dump::chain_tracker(opts, prev_root));
  // A tracker's self-test (pagemap-scan: milliseconds) and the VMA-flags
  // program's load run now, not in the freeze where their first use would.
  const TrackerInfo* tracker_info = find_tracker(tracker);
  if (!tracker_info) return make_error(EINVAL, "unknown tracker " + tracker);
  (void)dirty::probe_tracker(tracker_info->kind);
  (void)dump::vma_flags_available();
  std::array<uint8_t, 16> chain_id{};
  if (prev)
    chain_id = prev_root->chain_id;
  else
    CKPT_TRY(dump::new_chain_id(&chain_id));

  // An incremental's trackers after their work while the job ran.
  std::map<pid_t, std::shared_ptr<dirty::Tracker>> ready;
  // What the chain knows of the process `pid`.
  auto chain_spec = [&](pid_t pid) {
    dump::MemberSpec ms;
    ms.record_hashes = !prev && !opts.live;
    if (ready.count(pid)) ms.ready_tracker = ready.at(pid);
    if (prev && prev->members.count(pid)) {
      const image::SnapshotReader* r = prev->members.at(pid).get();
      ms.prev = &r->meta();
      ms.prev_hashes = &r->page_hashes();
      ms.prev_digest = r->meta_digest();
    }
    if (hint && hint->members.count(pid)) ms.hint = &hint->members.at(pid)->meta();
    ms.tracker = tracker;
    ms.tracking = opts.tracking;
    ms.log = &opts.log;
    ms.generation = generation;
    ms.chain_id = chain_id;
    return ms;
  };

  // The member `i` of the frozen job.
  auto member_spec = [&](const job::FrozenJob& fj, size_t i, const std::vector<pid_t>& pids,
                         const SharedOwners& owners) {
    const pid_t pid = fj.members()[i].pid;
    dump::MemberSpec ms = chain_spec(pid);
    ms.fp = fj.process(i);
    ms.job = pids;
    ms.tcp_established = opts.tcp_established;
    ms.scratch_max_bytes = opts.scratch_max_bytes;
    ms.saves_shared = [&owners, pid](const image::SharedObject& o) {
      auto it = owners.find(o);
      return it == owners.end() || it->second == pid;
    };
    return ms;
  };

  // The process itself while it runs (a pre-copy round's collect): a job of one.
  auto member_spec_running = [&](pid_t pid) {
    dump::MemberSpec ms = chain_spec(pid);
    ms.pid = pid;
    ms.job = {pid};
    ms.saves_shared = [](const image::SharedObject&) { return true; };
    return ms;
  };

  // The generation being written, and each member's files in it (a live
  // checkpoint fills them before the final freeze).
  CKPT_ASSIGN(auto gen, image::GenerationWriter::create(opts.dir, generation));
  std::map<pid_t, std::unique_ptr<image::SnapshotWriter>> member_writers;
  auto writer_for = [&](pid_t pid) -> Result<image::SnapshotWriter*> {
    auto& w = member_writers[pid];
    if (!w) {
      auto r = image::SnapshotWriter::create_in(image::member_dir(gen->path(), pid, opts.pid),
                                                generation, chain_id, opts.direct_io);
      if (!r.ok()) return r.error();
      w = std::move(*r);
      w->set_durable(!opts.no_sync);
      w->set_compression(opts.compress_level, compress_threads());
    }
    return w.get();
  };

  // The capture buffers (dump/capture), their first part faulted in while
  // the job still runs: see capture_prefault_bytes.
  dump::Capture capture(
      opts.capture_bytes >= 0 ? uint64_t(opts.capture_bytes) : dump::default_capture_budget(),
      opts.capture);
  // What the final copy is expected to take: what the parent incremental
  // copied (its non-zero runs, uncompressed) or what reads as written below.
  uint64_t expected = 0;
  if (prev && prev->root()->meta().parent_generation != 0)
    for (const auto& [pid, r] : prev->members)
      for (const image::PageRun& run : r->runs())
        if (!run.zero()) expected += run.bytes();

  // The trackers' side state waits in memory until the job runs again
  // (declared before `frozen`: on an early return the job is released first).
  dirty::LedgerHold hints;
  std::unique_ptr<job::FrozenJob> frozen;
  double t_frozen = 0;
  std::map<pid_t, std::unique_ptr<dump::Precopy>> precopies;
  std::vector<pid_t> first_members;  // live: the job at its first pre-copy round
  if (prev) {
    // While the job runs: what keeps the (first) collect small
    // (dirty::Tracker::before_freeze), and what reads as written already: a
    // frozen copy's buffers for it are faulted in now (the first incremental
    // after a full has no parent incremental to go by). A live one's final
    // copy is only what the last round leaves.
    PhaseTrace pv("before freeze", &opts.log);
    uint64_t written = 0;
    for (const auto& member : prev->members) {
      uint64_t w = 0;
      ready[member.first] =
          dump::prepare_tracker(member_spec_running(member.first), opts.live ? nullptr : &w);
      written += w;
    }
    expected = std::max(expected, written);
    pv.mark("trackers");
  }
  // A full copies the whole process, and so does every generation of the
  // hash tracker (it compares after the copy): the writer recycles their
  // buffers (dump::kFullCopy). A live one copies only what its last round
  // leaves, and its rounds fault buffers in as they go.
  if ((!prev || !tracker_info->kernel) && !opts.live) expected = dump::kFullCopy;
  {
    PhaseTrace pf("before freeze", &opts.log);
    capture.prefault(dump::capture_prefault_bytes(opts.pid, expected));
    pf.mark("buffers");
  }
  if (opts.live && !tracker_info->kernel) {
    stats.live_stop = "the hash tracker cannot pre-copy: pages copied into memory while frozen";
  } else if (opts.live) {
    // Pre-copy rounds while the job runs (dump/precopy); the round the
    // stop rule picks stays frozen and becomes the final one below.
    const double t_live = now_seconds();
    uint64_t prev_bytes = 0;
    // Rounds after the arm collect while the process runs (a single
    // process: a tree's membership is only known frozen). Only the final
    // round freezes it, for a collect of what it wrote since the last one.
    const bool running_rounds = !opts.tree;
    for (int round = 1;; ++round) {
      if (running_rounds && (prev || round > 1)) {
        PhaseTrace pt("round (running)", &opts.log);
        std::unique_ptr<dump::Precopy>& pc = precopies[opts.pid];
        if (!pc) pc = std::make_unique<dump::Precopy>();
        dump::MemberSpec ms = member_spec_running(opts.pid);
        CKPT_TRY(pc->plan_round(ms, &stats));
        const uint64_t bytes = pc->round_bytes();
        pt.mark("collect+plan");
        if (const char* why = dump::precopy_stop(dump::PrecopyLimits{}, round, bytes, prev_bytes,
                                                 now_seconds() - t_live)) {
          stats.live_stop = why;
          pc->collected_now = false;  // the process ran since: the final round collects
          break;
        }
        CKPT_ASSIGN(image::SnapshotWriter * w, writer_for(opts.pid));
        CKPT_TRY(pc->copy(*w));
        pt.mark("copy");
        stats.live_rounds = uint64_t(round);
        stats.precopy_bytes += bytes;
        prev_bytes = bytes;
        continue;
      }
      t_frozen = now_seconds();
      PhaseTrace pt("round", &opts.log);
      CKPT_ASSIGN(frozen, job::FrozenJob::freeze(opts.pid, opts.tree));
      pt.mark("freeze");
      const std::vector<proc::Member>& ms = frozen->members();
      std::vector<pid_t> pids;
      for (const proc::Member& m : ms) pids.push_back(m.pid);
      const SharedOwners owners = shared_memory_owners(ms);
      std::map<pid_t, std::unique_ptr<dump::Precopy>> now;
      uint64_t bytes = 0;
      for (size_t i = 0; i < ms.size(); ++i) {
        if (ms[i].zombie) continue;
        auto pc = precopies.count(ms[i].pid) ? std::move(precopies[ms[i].pid])
                                             : std::make_unique<dump::Precopy>();
        Status s = pc->plan_round(member_spec(*frozen, i, pids, owners), &stats);
        if (!s.ok()) return proc::name_member(s.error(), ms[i].pid, ms.size());
        bytes += pc->round_bytes();
        now[ms[i].pid] = std::move(pc);
      }
      pt.mark("plan (collect)");
      if (round == 1) first_members = pids;
      precopies = std::move(now);  // members gone since the last round are dropped
      for (auto it = member_writers.begin(); it != member_writers.end();)
        it = precopies.count(it->first) ? std::next(it) : member_writers.erase(it);
      if (const char* why = dump::precopy_stop(dump::PrecopyLimits{}, round, bytes, prev_bytes,
                                               now_seconds() - t_live)) {
        stats.live_stop = why;
        break;
      }
      CKPT_TRY(frozen->release());
      stats.precopy_frozen_max_seconds =
          std::max(stats.precopy_frozen_max_seconds, now_seconds() - t_frozen);
      frozen.reset();
      hints.write();
      bytes = 0;  // round 1 of a full plans its pages in copy()
      for (auto& [pid, pc] : precopies) {
        CKPT_ASSIGN(image::SnapshotWriter * w, writer_for(pid));
        if (Status s = pc->copy(*w); !s.ok())
          return proc::name_member(s.error(), pid, precopies.size());
        bytes += pc->round_bytes();
      }
      stats.live_rounds = uint64_t(round);
      stats.precopy_bytes += bytes;
      prev_bytes = bytes;
    }
  }
  PhaseTrace pt("final", &opts.log);
  if (!frozen) {
    t_frozen = now_seconds();
    CKPT_ASSIGN(frozen, job::FrozenJob::freeze(opts.pid, opts.tree));
    pt.mark("freeze");
  }
  const std::vector<proc::Member>& members = frozen->members();
  std::vector<pid_t> pids;
  for (const proc::Member& m : members) pids.push_back(m.pid);
  if (!first_members.empty()) stats.members_changed = proc::membership_change(first_members, pids);
  const SharedOwners owners = shared_memory_owners(members);
  pt.mark("shared owners");
  job::OutsideTcp outside;  // --tcp-established: held back until the job runs (or is restored)
  if (opts.tcp_established) CKPT_TRY(outside.lock(pids));
  if (hooks && hooks->frozen) CKPT_TRY(hooks->frozen());

  // Describe every member and plan its memory, all frozen.
  std::vector<std::unique_ptr<dump::MemberDump>> dumps;
  std::vector<dump::MemberDump*> live;
  // A full that fails from here until the job runs again takes back the
  // tracking it armed (its live rounds', or the arm after the copy): the
  // job is left as it was found.
  auto undo_arms = [&](Error e) -> Error {
    if (prev) return e;
    for (auto& [pid, pc] : precopies)
      if (pc && pc->tracker) (void)pc->tracker->release(pid, pc->tstate);
    for (auto& d : dumps) d->disarm();
    return e;
  };
  // Loopback data between the members may still be on its way: the
  // connections are read once it has arrived (sockets/tcp_settle.hpp).
  if (Status s = sockets::settle_job_tcp(pids); !s.ok()) return undo_arms(s.error());
  pt.mark("tcp settled");
  dump::ScratchSaved scratch_saved;  // a tmpfs file held by several members is read once
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].zombie) continue;
    const pid_t pid = members[i].pid;
    dump::MemberSpec ms = member_spec(*frozen, i, pids, owners);
    ms.scratch_saved = &scratch_saved;
    if (precopies.count(pid)) ms.precopy = precopies[pid].get();
    auto md = std::make_unique<dump::MemberDump>();
    Status s = md->prepare(ms, &stats);
    dumps.push_back(std::move(md));
    if (!s.ok()) return undo_arms(proc::name_member(s.error(), pid, members.size()));
    live.push_back(dumps.back().get());
  }
  if (Status s = check_terminals(members, live); !s.ok()) return undo_arms(s.error());
  for (auto it = member_writers.begin(); it != member_writers.end();)  // gone since the last round
    it = precopies.count(it->first) && frozen_has(members, it->first) ? std::next(it)
                                                                      : member_writers.erase(it);

  image::JobMeta jm;
  jm.generation = generation;
  jm.chain_id = chain_id;
  for (const proc::Member& m : members)
    jm.members.push_back({m.pid, m.ppid, m.pgid, m.sid, m.zombie ? image::kMemberZombie : 0u,
                          m.zombie ? m.exit_status : 0});
  if (opts.tree) jm.members[0].flags |= image::kMemberTree;
  for (size_t i = 0; i < members.size(); ++i) {
    const proc::Member& m = members[i];
    if (m.ctty || m.zombie || m.sid == m.pid) continue;
    for (const proc::Member& leader : members)
      if (leader.pid == m.sid && leader.ctty) jm.members[i].flags |= image::kMemberNoCtty;
  }
  jm.shares = find_shared_files(live);
  pt.mark("describe+plan");

  // Memory: each member's pages are copied into buffers the tool owns
  // (dump/capture) and drained into its own files by a writer thread; the
  // job runs again once every page is copied, not once the page cache took
  // them. Progress over the whole job.
  uint64_t total = 0;
  for (auto* d : live) total += d->plan.bytes();
  std::vector<image::SnapshotWriter*> writers;
  std::vector<dump::PageSink> sinks;
  const double t_mem = now_seconds();
  for (auto* d : live) {
    CKPT_ASSIGN(image::SnapshotWriter * w, writer_for(d->pid()));
    writers.push_back(w);
    auto sink = d->capture_sink(*w);
    if (!sink.ok()) return undo_arms(proc::name_member(sink.error(), d->pid(), members.size()));
    sinks.push_back(std::move(*sink));
  }
  // The copy runs on a second thread while this one, the tracer, arms each
  // full's tracking (write-protecting every page: as long as the copy of a
  // 64 MiB process here). Both only while frozen: the copy reads pages, the
  // arm marks them, neither changes what the other sees.
  size_t failed_member = live.size();
  auto copy = std::async(std::launch::async, [&]() -> Status {
    uint64_t done = 0;
    for (size_t k = 0; k < live.size(); ++k) {
      Status s = capture.read(live[k]->pid(), live[k]->plan, std::move(sinks[k]), opts.progress,
                              done, total);
      if (!s.ok()) {
        failed_member = k;
        return s;
      }
      done += live[k]->plan.bytes();
    }
    return {};
  });
  Status armed;
  pid_t arm_failed = 0;
  for (auto* d : live)
    if (armed = d->captured(!opts.kill_after); !armed.ok()) {
      arm_failed = d->pid();
      break;
    }
  while (copy.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready)
    capture.report();  // on this thread, as ckpt.h promises
  Status copied = copy.get();
  if (!copied.ok())
    return undo_arms(proc::name_member(copied.error(), live[failed_member]->pid(), members.size()));
  if (!armed.ok()) return undo_arms(proc::name_member(armed.error(), arm_failed, members.size()));
  pt.mark("copy+arm");

  if (hooks && hooks->captured)
    if (Status s = hooks->captured(); !s.ok()) return undo_arms(s.error());
  // Memory is copied: a running job cannot change the image any more, so it
  // goes back to work while the files are written and made durable. With
  // --kill it stays stopped until the checkpoint is committed.
  double t_released = 0;
  if (!opts.kill_after) {
    CKPT_TRY(frozen->release());
    outside.unlock();
    t_released = now_seconds();
    pt.mark("release");
    hints.write();
  }
  capture.resume();
  CKPT_TRY(capture.finish());
  for (auto* d : live) d->finish_write();
  stats.memory_seconds = now_seconds() - t_mem;
  stats.capture_peak_bytes = capture.peak_bytes();
  pt.mark("write (after release)");
  // Bound bottom-up (docs/format.md): job.img holds the other members'
  // meta.img digests, and the root's meta.img (live[0], written last) the
  // digest of job.img, so the root's digest covers every file of the
  // generation.
  for (size_t i = 1; i < live.size(); ++i) {
    CKPT_TRY(writers[i]->commit(live[i]->meta));
    for (image::JobMember& m : jm.members)
      if (m.pid == live[i]->pid()) m.meta_digest = writers[i]->meta_digest();
  }
  live[0]->meta.link.binds_job = true;
  CKPT_TRY(image::write_job_file(gen->path(), jm, !opts.no_sync, &live[0]->meta.link.job_digest));
  CKPT_TRY(writers[0]->commit(live[0]->meta));
  if (hooks && hooks->written) CKPT_TRY(hooks->written());
  CKPT_TRY(gen->commit(!opts.no_sync));
  pt.mark("commit");
  if (opts.kill_after) {
    // The job is still frozen: a migration sends the generation now, and
    // the job lives on untouched if that fails (job/checkpoint.hpp).
    if (committed)
      if (Status s = committed(image::generation_dir(opts.dir, generation)); !s.ok()) {
        (void)frozen->release();
        return s.error();
      }
    const Status parked = outside.park(live, opts.tcp_established);  // closed silently by the kill
    CKPT_TRY(frozen->kill());
    t_released = now_seconds();
    if (!parked.ok())
      return make_error(parked.error().code,
                        "the checkpoint is committed, but its peers may have seen the end of "
                        "their connections: " +
                            parked.error().message);
  }

  stats.generation = generation;
  stats.parent_generation = prev ? prev->job.generation : 0;
  stats.tracker = tracker;
  stats.processes = members.size();
  stats.frozen_seconds = t_released - t_frozen;
  for (size_t i = 0; i < live.size(); ++i) dump::add_member_stats(*live[i], *writers[i], &stats);
  stats.total_seconds = now_seconds() - t0;
  return stats;
}

}  // namespace

namespace job {

Result<CheckpointStats> checkpoint_round(const CheckpointOptions& opts, uint64_t first_generation,
                                         const CommittedHook& committed) {
  const double t0 = now_seconds();
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  if (gens.empty())
    return checkpoint_job(opts, nullptr, first_generation ? first_generation : 1, t0, nullptr,
                          committed);
  CKPT_ASSIGN(PreviousJob prev, open_previous(image::generation_dir(opts.dir, gens.back())));
  if (prev.job.members[0].pid != opts.pid)
    return make_error(
        EINVAL, opts.dir + " holds checkpoints of PID " + std::to_string(prev.job.members[0].pid));
  return checkpoint_job(opts, &prev, gens.back() + 1, t0, nullptr, committed);
}

}  // namespace job

namespace {

Result<CheckpointStats> full_round(const CheckpointOptions& opts, const job::RoundHooks* hooks) {
  const double t0 = now_seconds();
  CKPT_TRY(image::ensure_dir(opts.dir));
  image::remove_stale_temps(opts.dir);
  std::string moved_aside;
  CKPT_TRY(dump::claim_directory(opts.dir, opts.pid, opts.force, &moved_aside));
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  // An earlier generation of the same job says what a thread found in
  // restart_syscall is waiting in.
  std::unique_ptr<PreviousJob> newest;
  if (!gens.empty())
    if (auto r = open_previous(image::generation_dir(opts.dir, gens.back()));
        r.ok() && r->job.members[0].pid == opts.pid)
      newest = std::make_unique<PreviousJob>(std::move(*r));
  CKPT_ASSIGN(CheckpointStats stats,
              checkpoint_job(opts, nullptr, gens.empty() ? 1 : gens.back() + 1, t0, newest.get(),
                             {}, hooks));
  // Without fsync the new full may not survive a power loss: the chain it
  // supersedes stays until a durable full (or cr_compact) replaces it.
  if (!opts.no_sync) image::remove_generations_before(opts.dir, stats.generation);
  stats.moved_aside = moved_aside;
  return stats;
}

Result<CheckpointStats> incremental_round(const CheckpointOptions& opts,
                                          const job::RoundHooks* hooks) {
  const double t0 = now_seconds();
  auto gens = image::list_generations(opts.dir);
  if (!gens.ok() || gens->empty())
    return make_error(ENOENT, "no checkpoint chain in " + opts.dir +
                                  ": an incremental needs a full checkpoint first (cr_full)");
  image::remove_stale_temps(opts.dir);
  CKPT_ASSIGN(PreviousJob prev, open_previous(image::generation_dir(opts.dir, gens->back())));
  if (prev.job.members[0].pid != opts.pid)
    return make_error(EINVAL, opts.dir + " holds checkpoints of PID " +
                                  std::to_string(prev.job.members[0].pid) + ", not of " +
                                  std::to_string(opts.pid));
  const image::ImageMeta& root = prev.root()->meta();
  if ((root.tracker.empty() || root.tracker == "hash"))
    for (auto& [pid, r] : prev.members)
      if (r->page_hashes().empty() && !r->runs().empty())
        return make_error(EINVAL, "generation " + std::to_string(gens->back()) +
                                      " carries no page hashes: take a new full checkpoint");
  // The chain's scope stays what cr_full chose.
  CheckpointOptions o = opts;
  o.tree = opts.tree || (prev.job.members[0].flags & image::kMemberTree);
  return checkpoint_job(o, &prev, gens->back() + 1, t0, nullptr, {}, hooks);
}

}  // namespace

Result<CheckpointStats> checkpoint_full(const CheckpointOptions& opts) {
  return full_round(opts, nullptr);
}

Result<CheckpointStats> checkpoint_incremental(const CheckpointOptions& opts) {
  return incremental_round(opts, nullptr);
}

void release_buffers() {
  dump::release_arenas();
}

Result<CheckpointStats> job::hooked_round(const CheckpointOptions& opts, bool full,
                                          const RoundHooks& hooks) {
  return full ? full_round(opts, &hooks) : incremental_round(opts, &hooks);
}

}  // namespace ckpt
