// cr_restart: verify the image, create the process, rebuild it, let it run.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <ckpt/ckpt.hpp>
#include <cstring>

#include "dirty/tracker.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "proc/inject.hpp"
#include "proc/regs.hpp"
#include "restore/address_space.hpp"
#include "restore/files.hpp"
#include "restore/image_trust.hpp"
#include "restore/spawn.hpp"
#include "restore/syscall_restart.hpp"
#include "restore/tasks.hpp"
#include "util/clock.hpp"

namespace ckpt {

namespace {

// The chain of the generation to restore; `newest`: whether it is the newest
// generation in the directory.
Result<image::Chain> open_generation(const RestoreOptions& opts, bool* newest) {
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + opts.dir);
  uint64_t gen = opts.generation ? opts.generation : gens.back();
  if (std::find(gens.begin(), gens.end(), gen) == gens.end())
    return make_error(ENOENT, "no generation " + std::to_string(gen) + " in " + opts.dir);
  *newest = gen == gens.back();
  return image::open_chain(opts.dir, gen);
}

// Everything after the child exists; on error the caller kills the child.
struct RebuildOptions {
  const RestoreOptions& user;
  bool generation_is_newest;
};

Status rebuild(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan,
               const RebuildOptions& opts, RestoreStats* stats) {
  CKPT_ASSIGN(user_regs_struct base, proc::get_regs(pid));
  proc::RemoteSyscall rs(pid, base, reinterpret_cast<uint64_t>(ckpt_inject_insn));
  restore::AddressSpaceBuilder builder(pid, chain, plan, rs);
  restore::MemoryStats ms;
  CKPT_TRY(builder.build(opts.user.progress, &ms));
  stats->pages_written = ms.pages_written;
  stats->pages_zero = ms.pages_zero;
  stats->bytes_read = ms.bytes_read;
  stats->pages_read = ms.bytes_read / image::kPageSize;

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
  restore::TaskRestorer tasks(pid, meta, builder);
  CKPT_TRY(tasks.create_threads(rs));
  for (size_t i = 1; i < meta.threads.size(); ++i) CKPT_TRY(tasks.restore_thread(i));
  CKPT_TRY(tasks.restore_leader());
  CKPT_TRY(proc::set_xstate(pid, t.xstate));
  user_regs_struct captured;
  std::memcpy(&captured, t.gpregs.data(), sizeof captured);
  user_regs_struct final_regs = restore::resume_registers(captured);
  // The last call removes the trampoline it runs from; the registers of the
  // checkpoint are loaded at its exit stop, so nothing else runs in between.
  CKPT_ASSIGN(long ret, rs.call_and_load(final_regs, SYS_munmap, builder.trampoline(),
                                         restore::AddressSpaceBuilder::kTrampolineLen));
  if (ret != 0) return sys_error("removing the restore trampoline", int(-ret));
  CKPT_TRY(tasks.release());
  return {};
}

}  // namespace

Result<RestoreStats> restore_process(const RestoreOptions& opts) {
  const double t0 = now_seconds();
  bool newest = false;
  CKPT_ASSIGN(image::Chain chain, open_generation(opts, &newest));
  const image::ImageMeta& meta = chain.newest();
  const image::RestorePlan plan = image::plan_chain(chain);
  RestoreStats stats;
  stats.generation = meta.generation;
  stats.vmas = meta.vmas.size();
  stats.generations_read = chain.links.size();
  stats.pages_skipped = plan.pages_skipped;

  CKPT_TRY(restore::check_image_trust(opts.dir, chain));
  CKPT_TRY(restore::check_files_unchanged(meta, opts.force));
  CKPT_ASSIGN(pid_t pid, restore::spawn_stopped(meta, opts.new_pid));
  RebuildOptions ro{opts, newest};
  Status st = rebuild(pid, chain, plan, ro, &stats);
  if (!st.ok()) {
    ::kill(pid, SIGKILL);
    int ws;
    while (::waitpid(pid, &ws, __WALL) > 0 && !WIFEXITED(ws) && !WIFSIGNALED(ws)) {
    }
    return st.error();
  }
  stats.pid = pid;
  stats.seconds = now_seconds() - t0;
  return stats;
}

}  // namespace ckpt
