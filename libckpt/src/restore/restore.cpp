// cr_restart: verify the image, create the process, rebuild it, let it run.
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <ckpt/ckpt.hpp>
#include <cstring>
#include <future>
#include <map>
#include <memory>

#include "dirty/ledger.hpp"
#include "dirty/tracker.hpp"
#include "image/chain_link.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "proc/inject.hpp"
#include "proc/regs.hpp"
#include "proc/syscall_restart.hpp"
#include "proc/tree.hpp"
#include "restore/address_space.hpp"
#include "restore/file_locks.hpp"
#include "restore/files.hpp"
#include "restore/image_trust.hpp"
#include "restore/job_spawn.hpp"
#include "restore/restore_held.hpp"
#include "restore/scratch.hpp"
#include "restore/shared_memory.hpp"
#include "restore/spawn.hpp"
#include "restore/tasks.hpp"
#include "tty/pty.hpp"
#include "util/clock.hpp"
#include "util/phase_trace.hpp"

namespace ckpt {

namespace {

// The members of the generation to restore; `newest`: whether it is the
// newest generation in the directory.
Result<image::JobMeta> open_generation(const RestoreOptions& opts, bool* newest, uint64_t* out) {
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + opts.dir);
  uint64_t gen = opts.generation ? opts.generation : gens.back();
  if (std::find(gens.begin(), gens.end(), gen) == gens.end())
    return make_error(ENOENT, "no generation " + std::to_string(gen) + " in " + opts.dir);
  *newest = gen == gens.back();
  *out = gen;
  return image::read_job_or_root(image::generation_dir(opts.dir, gen));
}

// Everything after the child exists; on error the caller kills the child.
struct RebuildOptions {
  const RestoreOptions& user;
  bool generation_is_newest;
  const image::SharedPaths* shared_memory = nullptr;
};

// One member, rebuilt up to the point where it would run: its threads and
// registers are loaded, and it runs when `tasks` releases it.
struct Rebuilt {
  std::unique_ptr<proc::RemoteSyscall> rs;
  std::unique_ptr<restore::AddressSpaceBuilder> builder;
  std::unique_ptr<restore::TaskRestorer> tasks;
};

Status rebuild(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan,
               const RebuildOptions& opts, pid_t join_pgid,
               const std::vector<restore::HeldLock>& locks, RestoreStats* stats, Rebuilt* out) {
  PhaseTrace pb("rebuild", &opts.user.log);
  CKPT_ASSIGN(user_regs_struct base, proc::get_regs(pid));
  out->rs = std::make_unique<proc::RemoteSyscall>(pid, base,
                                                  reinterpret_cast<uint64_t>(ckpt_inject_insn));
  proc::RemoteSyscall& rs = *out->rs;
  // A process group led by another member (which made it already).
  if (join_pgid) {
    CKPT_ASSIGN(long r, rs.call(SYS_setpgid, 0, uint64_t(join_pgid)));
    if (r != 0)
      return sys_error(
          "PID " + std::to_string(pid) + " joining process group " + std::to_string(join_pgid),
          int(-r));
  }
  out->builder = std::make_unique<restore::AddressSpaceBuilder>(pid, chain, plan, rs);
  restore::AddressSpaceBuilder& builder = *out->builder;
  builder.map_shared_from(opts.shared_memory);
  restore::MemoryStats ms;
  CKPT_TRY(builder.build(opts.user.progress, &ms, &opts.user.log));
  CKPT_TRY(restore::take_locks(pid, builder, locks));
  pb.mark("build");
  stats->pages_written += ms.pages_written;
  stats->pages_zero += ms.pages_zero;
  stats->bytes_read += ms.bytes_read;
  stats->pages_read += ms.bytes_read / image::kPageSize;

  const image::ImageMeta& meta = chain.newest();
  const image::ThreadRecord& t = meta.threads[0];
  // Restoring the newest generation of a tracked chain: start tracking now,
  // before the process runs, so the next cr_incr saves only what it writes.
  // (An older generation is another timeline: the next cr_incr then finds no
  // tracker and saves everything.)
  if (auto tracker = dirty::make_tracker(meta.tracker); tracker && opts.generation_is_newest) {
    dirty::TrackerState state;
    state.target_fd = meta.tracker_fd;
    state.continue_chain = true;
    state.chain_id = meta.chain_id;
    state.generation = meta.generation;
    CKPT_TRY(tracker->arm(pid, meta.vmas, &state));
    stats->tracking = state.target_fd == meta.tracker_fd ? "armed" : "armed at another fd";
  }
  pb.mark("arm");
  out->tasks = std::make_unique<restore::TaskRestorer>(pid, meta, builder);
  restore::TaskRestorer& tasks = *out->tasks;
  CKPT_TRY(tasks.create_threads(rs));
  for (size_t i = 1; i < meta.threads.size(); ++i) CKPT_TRY(tasks.restore_thread(i));
  CKPT_TRY(tasks.restore_leader());
  CKPT_TRY(proc::set_xstate(pid, t.xstate));
  user_regs_struct captured;
  std::memcpy(&captured, t.gpregs.data(), sizeof captured);
  user_regs_struct final_regs = proc::resume_registers(captured);
  // The last call removes the trampoline it runs from; the registers of the
  // checkpoint are loaded at its exit stop, so nothing else runs in between.
  CKPT_ASSIGN(long ret, rs.call_and_load(final_regs, SYS_munmap, builder.trampoline(),
                                         restore::AddressSpaceBuilder::kTrampolineLen));
  if (ret != 0) return sys_error("removing the restore trampoline", int(-ret));
  pb.mark("tasks");
  return {};
}

// The slave of each pty that was a session's controlling terminal, for the
// members of that session (spawn makes it theirs again).
Status controlling_terminals(const std::vector<const image::ImageMeta*>& metas,
                             const tty::Pairs& ptys, std::vector<restore::SpawnMember>* spawn,
                             std::vector<UniqueFd>* fds) {
  for (const tty::Controlling& c : tty::controlling_ttys(metas)) {
    auto pair = ptys.masters.find(c.index);
    if (pair == ptys.masters.end()) continue;
    UniqueFd slave(::ioctl(pair->second.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!slave.valid())
      return sys_error("/dev/pts/" + std::to_string(c.index) +
                       ": opening the controlling terminal of session " +
                       std::to_string(c.session));
    for (restore::SpawnMember& sm : *spawn) {
      if (sm.member->sid != c.session) continue;
      sm.ctty_fd = slave.get();
      sm.foreground = sm.member->pid == c.foreground;
    }
    fds->push_back(std::move(slave));
  }
  return {};
}

}  // namespace

Result<RestoreStats> restore_process(const RestoreOptions& opts) {
  RestoreOptions o = opts;
  CKPT_ASSIGN(o.dir, resolve_checkpoint_dir(opts.dir));
  return restore::restore_held(o, nullptr);
}

namespace {

// One restore of a generation's job as named phases: open (every member's
// chain and plan, verified before any process exists), check (who could
// write the images, files changed on disk), make (saved files, shared
// memory, the descriptors, the process tree), rebuild (each member's
// address space and threads), release (all run, the root last). Members are
// declared so that an early return tears down in the right order.
class JobRestore {
 public:
  JobRestore(const RestoreOptions& opts, const restore::ReadyHook& ready,
             const restore::ReleaseHook& before_release)
      : opts_(opts), ready_(ready), before_release_(before_release), trace_("restore", &opts.log) {}
  Result<RestoreStats> run();

 private:
  Status open();
  Status check();
  Status make();
  Status rebuild_all();
  Status release();
  // Kills every process made so far and returns `e`.
  Error abandon(Error e);
  Error named(pid_t pid, const Error& e) const {
    return proc::name_member(e, pid, job_.members.size());
  }

  const RestoreOptions& opts_;
  const restore::ReadyHook& ready_;
  const restore::ReleaseHook& before_release_;
  PhaseTrace trace_;
  double t0_ = now_seconds();
  dirty::LedgerHold hints_;  // the trackers' side state: written once the job runs
  bool newest_ = false;
  uint64_t gen_ = 0;
  image::JobMeta job_;
  RestoreStats stats_;
  std::vector<image::Chain> chains_;
  std::vector<image::RestorePlan> plans_;
  std::vector<const image::ImageMeta*> metas_;
  std::vector<size_t> live_;  // member index of chains_[k]
  restore::SharedMemory shm_;
  std::vector<pid_t> pids_;
  std::vector<sockets::Held> held_;  // with ready_: connections to peers outside the job
  // The trackers' self-tests, on another thread while memory is written:
  // any return joins it.
  std::future<void> self_tests_;
  std::vector<Rebuilt> built_;
};

Result<RestoreStats> JobRestore::run() {
  CKPT_TRY(open());
  CKPT_TRY(check());
  CKPT_TRY(make());
  CKPT_TRY(rebuild_all());
  CKPT_TRY(release());
  stats_.pid = pids_[0];
  stats_.seconds = now_seconds() - t0_;
  return stats_;
}

Status JobRestore::open() {
  CKPT_ASSIGN(job_, open_generation(opts_, &newest_, &gen_));
  const std::string gen_dir = image::generation_dir(opts_.dir, gen_);
  const pid_t root = job_.members[0].pid;
  stats_.generation = gen_;
  stats_.processes = job_.members.size();
  for (size_t i = 0; i < job_.members.size(); ++i) {
    const image::JobMember& m = job_.members[i];
    if (m.zombie()) continue;
    auto chain = image::open_chain(opts_.dir, gen_, [&](uint64_t g) {
      return image::member_dir(image::generation_dir(opts_.dir, g), m.pid, root);
    });
    if (!chain.ok()) return named(m.pid, chain.error());
    // job.img as the root's metadata binds it, each member as job.img does.
    if (i == 0) CKPT_TRY(image::check_job_link(*chain->links[0], job_));
    if (i > 0)
      if (Status s = image::check_member_link(*chain->links[0], m,
                                              chains_[0].links[0]->meta().link.binds_job);
          !s.ok())
        return named(m.pid, s.error());
    if (chain->newest().process.pid != m.pid)
      return make_error(EBADMSG, gen_dir + ": member " + std::to_string(m.pid) +
                                     " holds the images of PID " +
                                     std::to_string(chain->newest().process.pid));
    plans_.push_back(image::plan_chain(*chain));
    chains_.push_back(std::move(*chain));
    live_.push_back(i);
  }
  for (auto& c : chains_) metas_.push_back(&c.newest());
  trace_.mark("open chains");
  // Shared anonymous memory gets its content from the member that saved it.
  const auto holders = restore::shared_memory_holders(metas_);
  for (size_t k = 0; k < chains_.size(); ++k) {
    std::vector<image::MemRange> others;
    for (const image::VmaRecord& v : metas_[k]->vmas)
      if (auto o = v.shared_object())
        if (auto h = holders.find(*o); h != holders.end() && h->second != k)
          others.push_back({v.start, v.end});
    restore::drop_slices(others, &plans_[k]);
  }
  return {};
}

Status JobRestore::check() {
  for (size_t k = 0; k < chains_.size(); ++k) {
    stats_.vmas += metas_[k]->vmas.size();
    stats_.generations_read += chains_[k].links.size();
    stats_.pages_skipped += plans_[k].pages_skipped;
    Status s = restore::check_image_trust(opts_.dir, chains_[k]);
    if (s.ok()) s = restore::check_files_unchanged(*metas_[k], opts_.force);
    if (!s.ok()) return named(metas_[k]->process.pid, s.error());
  }
  return {};
}

// Saved files put back, shared memory made once for every member, the
// files opened here (handed to the members at spawn, closed here once every
// member holds its own), then the tree of processes.
Status JobRestore::make() {
  CKPT_TRY(restore::restore_scratch(metas_));
  trace_.mark("trust+scratch");
  CKPT_TRY(shm_.create(metas_));
  trace_.mark("shm");
  restore::SharedFiles shared;
  shared.hold_outside = bool(ready_);
  shared.log = &opts_.log;
  for (auto [key, fd] : shm_.deleted_files()) shared.deleted[key] = fd;  // mapped and open
  for (const image::JobShare& s : job_.shares)
    shared.share_of[{s.pid, s.fd}] = {s.owner_pid, s.owner_fd};
  std::vector<restore::PreparedFiles> files(job_.members.size());
  std::vector<restore::SpawnMember> spawn(job_.members.size());
  for (size_t i = 0; i < job_.members.size(); ++i) spawn[i].member = &job_.members[i];
  for (size_t k = 0; k < chains_.size(); ++k) {
    Status s = restore::prepare_files(*metas_[k], &files[live_[k]], &shared);
    if (!s.ok()) return named(metas_[k]->process.pid, s.error());
    spawn[live_[k]].meta = metas_[k];
    spawn[live_[k]].files = &files[live_[k]];
  }
  CKPT_TRY(restore::finish_files(&shared));
  trace_.mark("files");
  held_ = std::move(shared.held);
  std::vector<UniqueFd> ctty;  // each session's terminal, until its members took it
  CKPT_TRY(controlling_terminals(metas_, shared.ptys, &spawn, &ctty));
  CKPT_ASSIGN(pids_, restore::spawn_job(spawn, opts_.new_pid));
  trace_.mark("spawn");
  return {};
}

// The tracking armed again before each process runs needs its tracker's
// self-test (pagemap-scan: milliseconds), once per process: on another
// thread while memory is written (not before the spawn: a raw clone3 child
// of a process with another thread could find malloc's lock held). Only the
// newest generation is tracked again.
Status JobRestore::rebuild_all() {
  if (newest_)
    self_tests_ = std::async(std::launch::async, [this] {
      for (const image::ImageMeta* m : metas_)
        if (const TrackerInfo* t = find_tracker(m->tracker); t && t->kernel)
          (void)dirty::probe_tracker(t->kind);
    });
  RebuildOptions ro{opts_, newest_, &shm_.paths()};
  built_.resize(chains_.size());
  for (size_t k = 0; k < chains_.size(); ++k) {
    const image::JobMember& m = job_.members[live_[k]];
    // Groups led by a member were made by their leaders at spawn; a group
    // whose leader is not in the job is the one the member inherited.
    const pid_t join = m.pgid != m.pid && job_.has_member(m.pgid) ? m.pgid : 0;
    // flock and OFD locks of an open file an earlier member holds too are
    // that member's to take.
    std::set<int> shared_fds;
    for (const image::JobShare& sh : job_.shares)
      if (sh.pid == m.pid) shared_fds.insert(sh.fd);
    const auto locks = restore::locks_to_take(*metas_[k], shared_fds);
    Status s =
        rebuild(pids_[live_[k]], chains_[k], plans_[k], ro, join, locks, &stats_, &built_[k]);
    if (!s.ok()) return abandon(named(m.pid, s.error()));
  }
  // Signal-driven I/O may name any thread of the job: all exist now.
  for (size_t k = 0; k < chains_.size(); ++k) {
    Status s = restore::set_owners(pids_[live_[k]], *metas_[k]);
    if (!s.ok()) return abandon(named(job_.members[live_[k]].pid, s.error()));
  }
  trace_.mark("rebuild");
  return {};
}

// Every member is ready. A job across nodes waits for the other nodes'
// parts; its connections between nodes leave repair mode only then. All
// run from here on (the root last).
Status JobRestore::release() {
  if (ready_) {
    Status s = ready_(pids_[0]);
    if (s.ok()) s = sockets::finish_held(&held_);
    if (!s.ok()) return abandon(s.error());
  }
  if (before_release_) {
    for (Rebuilt& b : built_)
      if (Status s = b.tasks->load_masks(); !s.ok()) return abandon(s.error());
    before_release_(pids_[0]);
  }
  Status result;
  for (size_t k = built_.size(); k-- > 0;) {
    Status s = built_[k].tasks->release();
    if (!s.ok() && result.ok()) result = s;
  }
  if (!result.ok()) return abandon(result.error());
  trace_.mark("release");
  hints_.write();
  return {};
}

Error JobRestore::abandon(Error e) {
  restore::kill_job(pids_);
  return e;
}

}  // namespace

Result<RestoreStats> restore::restore_held(const RestoreOptions& opts, const ReadyHook& ready,
                                           const ReleaseHook& before_release) {
  return JobRestore(opts, ready, before_release).run();
}

}  // namespace ckpt
