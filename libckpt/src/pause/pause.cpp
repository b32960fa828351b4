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
//   4. Load the checkpoint's registers at the exit of the last injected call
//      and let the process go.
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
#include "dirty/pagemap_scan.hpp"
#include "dirty/tracker.hpp"
#include "dump/collect.hpp"
#include "image/chain.hpp"
#include "image/store.hpp"
#include "mem/pagemap.hpp"
#include "pause/in_place.hpp"
#include "proc/freeze.hpp"
#include "proc/inject.hpp"
#include "proc/maps.hpp"
#include "proc/regs.hpp"
#include "restore/address_space.hpp"
#include "restore/syscall_restart.hpp"
#include "util/clock.hpp"
#include "util/zeros.hpp"

namespace ckpt {

namespace {

using mem::Range;

std::string readlink_str(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n < 0 ? std::string() : std::string(buf, size_t(n));
}

Status roll_back(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan,
                 const std::vector<Range>* candidates, pause::InPlaceStats* st) {
  pause::InPlace ip(pid, chain, plan, st);
  CKPT_TRY(ip.begin());
  CKPT_TRY(ip.fix_layout());
  CKPT_TRY(ip.write_memory(candidates, true));
  CKPT_TRY(ip.drop_new_pages(candidates));
  CKPT_TRY(ip.set_mm());
  CKPT_TRY(ip.set_signals());
  CKPT_TRY(ip.set_files());
  const image::ThreadRecord& t = chain.newest().threads[0];
  CKPT_TRY(proc::set_xstate(pid, t.xstate));
  uint64_t mask = t.sigmask;
  if (::ptrace(PTRACE_SETSIGMASK, pid, sizeof mask, &mask) != 0)
    return sys_error("setting the signal mask");
  user_regs_struct captured;
  std::memcpy(&captured, t.gpregs.data(), sizeof captured);
  user_regs_struct final_regs = restore::resume_registers(captured);
  return ip.end(&final_regs);
}

}  // namespace

Result<PauseStats> pause_process(const PauseOptions& opts) {
  const double t0 = now_seconds();
  PauseStats st;
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + opts.dir);
  CKPT_ASSIGN(image::Chain chain, image::open_chain(opts.dir, gens.back()));
  const image::ImageMeta& meta = chain.newest();
  st.generation = meta.generation;
  if (meta.process.pid != opts.pid)
    return make_error(EINVAL, opts.dir + " holds checkpoints of PID " +
                                  std::to_string(meta.process.pid) + ", not of " +
                                  std::to_string(opts.pid));
  std::string exe = readlink_str("/proc/" + std::to_string(opts.pid) + "/exe");
  if (exe.empty()) return make_error(ESRCH, "no process " + std::to_string(opts.pid));
  if (exe != meta.mm.exe_path)
    return make_error(EINVAL, "PID " + std::to_string(opts.pid) + " runs " + exe +
                                  ", the checkpoint is of " + meta.mm.exe_path);
  if (meta.threads.size() != 1)
    return make_error(ENOTSUP, "the checkpoint has " + std::to_string(meta.threads.size()) +
                                   " threads: in-place rollback is single-threaded so far");
  const image::RestorePlan plan = image::plan_chain(chain);
  // Nothing unverified may reach the process.
  std::set<const image::PageRun*> checked;
  for (const image::PlanSlice& sl : plan.slices)
    if (!sl.zero() && checked.insert(sl.run).second)
      CKPT_TRY(chain.links[sl.link]->verify_run(*sl.run));

  const double tf = now_seconds();
  CKPT_ASSIGN(std::unique_ptr<proc::FrozenProcess> fp, proc::FrozenProcess::freeze(opts.pid));
  if (fp->threads().size() != 1)
    return make_error(ENOTSUP, "PID " + std::to_string(opts.pid) + " has " +
                                   std::to_string(fp->threads().size()) +
                                   " threads now, the checkpoint one: not rolled back");
  // The pages that may differ: the tracker's dirty set, when the chain has one.
  std::vector<Range> candidates;
  bool tracked = false;
  if (auto tracker = dirty::make_tracker(meta.tracker)) {
    CKPT_ASSIGN(auto maps, proc::read_maps(opts.pid));
    auto cur = dump::collect_vmas(opts.pid, maps);
    dirty::TrackerState ts;
    ts.target_fd = meta.tracker_fd;
    if (cur.ok() && ts.target_fd >= 0) {
      auto ds = tracker->collect(opts.pid, *cur, meta.vmas, &ts);
      if (ds.ok() && !ds->everything) {
        candidates = ds->written;
        candidates.insert(candidates.end(), ds->unknown.begin(), ds->unknown.end());
        dirty::normalize(candidates);
        tracked = true;
      }
    }
  }
  st.method = tracked ? "tracker" : "compare";

  pause::InPlaceStats ips;
  Status s = roll_back(opts.pid, chain, plan, tracked ? &candidates : nullptr, &ips);
  if (s.ok()) s = fp->release();
  st.pages_compared = ips.pages_compared;
  st.pages_written = ips.pages_written;
  st.pages_dropped = ips.pages_dropped;
  st.vmas_kept = ips.vmas_kept;
  st.vmas_unmapped = ips.vmas_unmapped;
  st.vmas_mapped = ips.vmas_mapped;
  st.files_reopened = ips.files_reopened;
  st.files_closed = ips.files_closed;
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
