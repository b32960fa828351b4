#include "migrate/warm_restore.hpp"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <cstring>

#include "dirty/layout.hpp"
#include "dirty/tracker.hpp"
#include "image/chain.hpp"
#include "pause/in_place.hpp"
#include "proc/inject.hpp"
#include "proc/regs.hpp"
#include "restore/address_space.hpp"
#include "restore/files.hpp"
#include "restore/spawn.hpp"
#include "restore/syscall_restart.hpp"
#include "restore/tasks.hpp"

namespace ckpt::migrate {

void WarmRestore::abort() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int ws;
  while (::waitpid(pid_, &ws, __WALL) > 0 && !WIFEXITED(ws) && !WIFSIGNALED(ws)) {
  }
  pid_ = 0;
}

Status WarmRestore::add(uint64_t gen) {
  CKPT_ASSIGN(image::Chain chain, image::open_chain(staging_, gen));
  const image::ImageMeta& meta = chain.newest();
  // The helper stays single-threaded while it is brought up to date; the
  // other threads are created at the end (finish), as a restore does.
  const image::RestorePlan plan = image::plan_chain(chain);
  if (pid_ == 0) {
    if (chain.links.size() != 1) return make_error(EINVAL, "warm restore must start with a full");
    CKPT_ASSIGN(pid_, restore::spawn_stopped(meta, new_pid_));
    CKPT_ASSIGN(user_regs_struct base, proc::get_regs(pid_));
    proc::RemoteSyscall rs(pid_, base, reinterpret_cast<uint64_t>(ckpt_inject_insn));
    restore::AddressSpaceBuilder b(pid_, chain, plan, rs);
    restore::MemoryStats ms;
    CKPT_TRY(b.build({}, &ms));  // verifies every run before writing it
    pages_written_ += ms.pages_written;
    // The trampoline goes; the child waits at that call's exit for the next generation.
    CKPT_ASSIGN(long r, rs.call_and_load(base, SYS_munmap, b.trampoline(),
                                         restore::AddressSpaceBuilder::kTrampolineLen));
    if (r != 0) return sys_error("removing the restore trampoline", int(-r));
    last_ = gen;
    return {};
  }
  if (chain.links.size() < 2 || chain.links[1]->meta().generation != last_)
    return make_error(
        EINVAL, "generation " + std::to_string(gen) + " does not follow " + std::to_string(last_));
  // Only what this generation holds can differ from what the process has.
  CKPT_TRY(chain.links.front()->verify_all());
  std::vector<mem::Range> changed;
  for (const image::PageRun& r : chain.links.front()->runs())
    changed.push_back({r.vaddr, r.bytes()});
  for (const image::MemRange& c : meta.complete) changed.push_back({c.start, c.end - c.start});
  dirty::normalize(changed);
  pause::InPlaceStats st;
  pause::InPlace ip(pid_, chain, plan, &st);
  CKPT_TRY(ip.begin());
  CKPT_TRY(ip.fix_layout());
  CKPT_TRY(ip.write_memory(&changed, false));
  CKPT_TRY(ip.drop_new_pages(&changed));
  CKPT_TRY(ip.end(nullptr));
  pages_written_ += st.pages_written;
  last_ = gen;
  return {};
}

Result<RestoreStats> WarmRestore::finish(const restore::ReleaseHook& before_release) {
  if (pid_ == 0) return make_error(EINVAL, "nothing to restore");
  CKPT_ASSIGN(image::Chain chain, image::open_chain(staging_, last_));
  const image::ImageMeta& meta = chain.newest();
  CKPT_TRY(restore::check_files_unchanged(meta, false));
  const image::RestorePlan plan = image::plan_chain(chain);
  RestoreStats stats;
  stats.generation = meta.generation;
  stats.generations_read = chain.links.size();
  stats.vmas = meta.vmas.size();
  // Tracking restarts before the process runs, as after a restore.
  if (auto tracker = dirty::make_tracker(meta.tracker); tracker && tracker->info().kernel) {
    dirty::TrackerState state;
    state.target_fd = meta.tracker_fd;
    state.chain_id = meta.chain_id;
    state.generation = meta.generation;
    CKPT_TRY(tracker->arm(pid_, meta.vmas, &state));
    stats.tracking = "armed";
  }
  pause::InPlaceStats st;
  pause::InPlace ip(pid_, chain, plan, &st);
  CKPT_TRY(ip.begin());
  CKPT_TRY(ip.set_mm());
  // The helper was set up from the first generation: dispositions and files
  // may have changed since.
  CKPT_TRY(ip.set_signals());
  CKPT_TRY(ip.set_files());
  // Threads, rseq, limits, timers, seccomp, masks: as a plain restore does.
  restore::TaskRestorer tasks(pid_, meta, ip.builder());
  CKPT_TRY(tasks.create_threads(ip.rs()));
  for (size_t i = 1; i < meta.threads.size(); ++i) CKPT_TRY(tasks.restore_thread(i));
  CKPT_TRY(tasks.restore_leader());
  const image::ThreadRecord& t = meta.threads[0];
  CKPT_TRY(proc::set_xstate(pid_, t.xstate));
  user_regs_struct captured;
  std::memcpy(&captured, t.gpregs.data(), sizeof captured);
  user_regs_struct final_regs = restore::resume_registers(captured);
  CKPT_TRY(ip.end(&final_regs));
  if (before_release) {
    CKPT_TRY(tasks.load_masks());
    before_release(pid_);
  }
  CKPT_TRY(tasks.release());
  stats.pid = pid_;
  stats.pages_written = pages_written_;
  pid_ = 0;  // it runs: no longer ours to kill
  return stats;
}

}  // namespace ckpt::migrate
