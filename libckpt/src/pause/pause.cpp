// cr_pause: roll a live process back to its newest checkpoint in place.
//
//   1. Open the chain and verify every page run the rollback may need,
//      before the process is touched.
//   2. Freeze it; find the pages that may differ from the checkpoint: with a
//      pagemap-scan chain, exactly those written since (the tracker's dirty
//      set); otherwise every saved page, read back and compared.
//   3. Through injected system calls (a trampoline as restore uses): unmap
//      mappings the checkpoint did not have, map those it had that are
//      missing or different (restore/address_space), rewrite differing pages
//      (/proc/PID/mem), drop pages populated since, set the mm fields,
//      signal dispositions, mask and files.
//   4. Load every other thread's registers, extended state and mask (the
//      threads must be the checkpoint's: same TIDs), then the leader's at
//      the exit of the last injected call, and let the process go.
#include <fcntl.h>
#include <linux/prctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <ckpt/pause.hpp>
#include <cstring>
#include <set>

#include "dirty/layout.hpp"
#include "dirty/ledger.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dirty/tracker.hpp"
#include "dump/collect.hpp"
#include "image/chain.hpp"
#include "image/generation_dir.hpp"
#include "image/store.hpp"
#include "mem/pagemap.hpp"
#include "pause/job_restart.hpp"
#include "proc/freeze.hpp"
#include "proc/inject.hpp"
#include "proc/maps.hpp"
#include "proc/regs.hpp"
#include "proc/syscall_restart.hpp"
#include "restore/address_space.hpp"
#include "restore/credentials.hpp"
#include "restore/file_locks.hpp"
#include "restore/in_place.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"
#include "util/zeros.hpp"

namespace ckpt {

namespace {

using mem::Range;

// Whether any thread of `pid` has a child now (a job of one forked since).
bool has_children(pid_t pid) {
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(task.c_str());
  if (!d) return false;
  bool any = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    UniqueFd fd(::open((task + "/" + e->d_name + "/children").c_str(), O_RDONLY | O_CLOEXEC));
    char c;
    if (fd.valid() && ::read(fd.get(), &c, 1) == 1) any = true;
  }
  ::closedir(d);
  return any;
}

// "TID 12 is new, TID 9 ended" for the threads that differ.
std::string describe_tids(const std::set<pid_t>& now, const std::set<pid_t>& then) {
  std::string out;
  auto add = [&](pid_t tid, const char* what) {
    if (!out.empty()) out += ", ";
    out += "TID " + std::to_string(tid) + what;
  };
  for (pid_t t : now)
    if (!then.count(t)) add(t, " is new");
  for (pid_t t : then)
    if (!now.count(t)) add(t, " ended");
  return out;
}

Status roll_back(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan,
                 const std::vector<Range>* candidates, restore::InPlaceStats* st) {
  restore::InPlace ip(pid, chain, plan, st);
  CKPT_TRY(ip.begin());
  CKPT_TRY(ip.fix_layout());
  CKPT_TRY(ip.write_memory(candidates, true));
  CKPT_TRY(ip.drop_new_pages(candidates));
  CKPT_TRY(ip.set_mm());
  CKPT_TRY(ip.set_signals());
  CKPT_TRY(ip.set_files());
  // The checkpoint's locks, held again (a lock held still is taken anew,
  // which changes nothing); the mappings laid out above may have dropped
  // POSIX ones.
  CKPT_TRY(restore::take_locks(pid, ip.builder(), restore::locks_to_take(chain.newest(), {})));
  // The other threads are the checkpoint's own (same TIDs, checked by the
  // caller), stopped: their registers, extended state and mask go back as
  // they are. Registers with orig_rax -1 keep the kernel from restarting
  // whatever call the freeze interrupted; the checkpoint's interrupted call
  // is re-executed instead (resume_registers). Alternate stack, robust list,
  // rseq and TID address are the thread's own from its start and kept.
  const auto& threads = chain.newest().threads;
  for (size_t i = 1; i < threads.size(); ++i) {
    const image::ThreadRecord& t = threads[i];
    CKPT_TRY(proc::set_xstate(t.tid, t.xstate));
    uint64_t mask = t.sigmask;
    if (::ptrace(PTRACE_SETSIGMASK, t.tid, sizeof mask, &mask) != 0)
      return sys_error("setting the signal mask of thread " + std::to_string(t.tid));
    user_regs_struct captured;
    std::memcpy(&captured, t.gpregs.data(), sizeof captured);
    CKPT_TRY(proc::set_regs(t.tid, proc::resume_registers(captured)));
  }
  const image::ThreadRecord& t = threads[0];
  CKPT_TRY(proc::set_xstate(pid, t.xstate));
  uint64_t mask = t.sigmask;
  if (::ptrace(PTRACE_SETSIGMASK, pid, sizeof mask, &mask) != 0)
    return sys_error("setting the signal mask");
  user_regs_struct captured;
  std::memcpy(&captured, t.gpregs.data(), sizeof captured);
  user_regs_struct final_regs = proc::resume_registers(captured);
  return ip.end(&final_regs);
}

// Refused unless `meta` (a checkpoint in `dir`) is of process `pid` as it
// runs now: the same PID, the same program.
Status check_same_program(pid_t pid, const std::string& dir, const image::ImageMeta& meta) {
  if (meta.process.pid != pid)
    return make_error(EINVAL, dir + " holds checkpoints of PID " +
                                  std::to_string(meta.process.pid) + ", not of " +
                                  std::to_string(pid));
  std::string exe = read_link_or_empty("/proc/" + std::to_string(pid) + "/exe");
  if (exe.empty()) return make_error(ESRCH, "no process " + std::to_string(pid));
  if (exe != meta.mm.exe_path)
    return make_error(EINVAL, "PID " + std::to_string(pid) + " runs " + exe +
                                  ", the checkpoint is of " + meta.mm.exe_path);
  return {};
}

// Every page run `plan` reads, verified once: nothing unverified may reach
// the process.
Status verify_plan(const image::Chain& chain, const image::RestorePlan& plan) {
  std::set<const image::PageRun*> checked;
  for (const image::PlanSlice& sl : plan.slices)
    if (!sl.zero() && checked.insert(sl.run).second)
      CKPT_TRY(chain.links[sl.link]->verify_run(*sl.run));
  return {};
}

// Threads are reused, so they must be the checkpoint's: the same TIDs. A
// thread started since has no state to go back to; one that ended cannot
// be brought back with its TID while the process lives (docs/migration.md).
Status check_same_threads(pid_t pid, const proc::FrozenProcess& fp, const image::ImageMeta& meta) {
  std::set<pid_t> now_tids, ckpt_tids;
  for (const auto& t : fp.threads()) now_tids.insert(t.tid);
  for (const auto& t : meta.threads) ckpt_tids.insert(t.tid);
  if (now_tids != ckpt_tids)
    return make_error(ENOTSUP, "the threads of PID " + std::to_string(pid) +
                                   " are not the checkpoint's (" +
                                   describe_tids(now_tids, ckpt_tids) + "): not rolled back");
  return {};
}

// The pages of frozen process `pid` that may differ from checkpoint `meta`:
// the tracker's dirty set, when the chain has one and it answers. False
// (and `candidates` untouched) when every saved page must be compared.
Result<bool> tracked_candidates(pid_t pid, const image::ImageMeta& meta,
                                std::vector<Range>* candidates) {
  auto tracker = dirty::make_tracker(meta.tracker);
  if (!tracker) return false;
  CKPT_ASSIGN(auto maps, proc::read_maps(pid));
  auto cur = dump::collect_vmas(pid, maps);
  dirty::TrackerState ts;
  ts.target_fd = meta.tracker_fd;
  // The process goes back to this generation: tracking stays relative to it.
  ts.chain_id = meta.chain_id;
  ts.generation = ts.prev_generation = meta.generation;
  if (!cur.ok() || ts.target_fd < 0) return false;
  auto ds = tracker->collect(pid, *cur, meta.vmas, &ts);
  if (!ds.ok() || ds->everything) return false;
  *candidates = ds->written;
  candidates->insert(candidates->end(), ds->unknown.begin(), ds->unknown.end());
  dirty::normalize(*candidates);
  return true;
}

void add_in_place_stats(const restore::InPlaceStats& ips, PauseStats* st) {
  st->pages_compared = ips.pages_compared;
  st->pages_written = ips.pages_written;
  st->pages_dropped = ips.pages_dropped;
  st->vmas_kept = ips.vmas_kept;
  st->vmas_unmapped = ips.vmas_unmapped;
  st->vmas_mapped = ips.vmas_mapped;
  st->files_reopened = ips.files_reopened;
  st->files_closed = ips.files_closed;
}

}  // namespace

Result<PauseStats> pause_process(const PauseOptions& given) {
  PauseOptions opts = given;
  CKPT_ASSIGN(opts.dir, resolve_checkpoint_dir(given.dir));
  const double t0 = now_seconds();
  PauseStats st;
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + opts.dir);
  {
    CKPT_ASSIGN(image::JobMeta job,
                image::read_job_or_root(image::generation_dir(opts.dir, gens.back())));
    const bool tree_chain = job.members[0].flags & image::kMemberTree;
    if (job.members.size() > 1 || ((opts.tree || tree_chain) && has_children(opts.pid)))
      return pause::pause_job_by_restart(opts, gens.back(), job);
  }
  CKPT_ASSIGN(image::Chain chain, image::open_chain(opts.dir, gens.back()));
  const image::ImageMeta& meta = chain.newest();
  st.generation = meta.generation;
  CKPT_TRY(check_same_program(opts.pid, opts.dir, meta));
  const image::RestorePlan plan = image::plan_chain(chain);
  CKPT_TRY(verify_plan(chain, plan));

  const double tf = now_seconds();
  dirty::LedgerHold hints;  // the tracker's side state: written once the process runs
  CKPT_ASSIGN(std::unique_ptr<proc::FrozenProcess> fp, proc::FrozenProcess::freeze(opts.pid));
  CKPT_TRY(check_same_threads(opts.pid, *fp, meta));
  CKPT_TRY(restore::check_credentials_unchanged(opts.pid, meta));
  std::vector<Range> candidates;
  CKPT_ASSIGN(const bool tracked, tracked_candidates(opts.pid, meta, &candidates));
  st.method = tracked ? "tracker" : "compare";
  st.pid = opts.pid;

  restore::InPlaceStats ips;
  // The point of no return: from the first change on, the process is
  // neither what it was nor the checkpoint until the rollback is over. If
  // cr_pause dies in between, the process dies with it (its chain is
  // intact: cr_restart brings the rolled-back state back, docs/security.md)
  // rather than run on half rolled back.
  Status s = proc::die_with_tracer(opts.pid);
  if (s.ok()) s = roll_back(opts.pid, chain, plan, tracked ? &candidates : nullptr, &ips);
  if (s.ok()) s = fp->release();
  add_in_place_stats(ips, &st);
  if (!s.ok()) {
    (void)fp->kill();
    return s.error().context("rollback failed midway, PID " + std::to_string(opts.pid) +
                             " was killed rather than left half rolled back");
  }
  st.frozen_seconds = now_seconds() - tf;
  st.seconds = now_seconds() - t0;
  return st;
}

}  // namespace ckpt
