// cr_pause of a job of several processes: the job goes back to its newest
// checkpoint by kill and restore with the same PIDs (the code of
// cr_restart), not in place. Why (docs/jobs.md, "Pause"): what members
// share (pipes and TCP connections with queued data, ptys, shared file
// offsets, process groups of members that exited) cannot all be put back
// into running processes, and the member set itself may have changed
// (forks, exits). Everything is checked before the job is touched: the
// chain of every member verifies, the root runs the checkpointed program,
// and every PID the checkpoint needs is either a member of the running job
// or free. The restored root is a child of the caller, not of the shell
// that started the job; the tool says so.
#include <sys/stat.h>
#include <unistd.h>

#include <ckpt/pause.hpp>
#include <fstream>
#include <set>

#include "image/chain.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "job/freeze.hpp"
#include "pause/job_restart.hpp"
#include "proc/tree.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"

namespace ckpt::pause {

namespace {

// The parent of `pid` as /proc says (0 if gone).
pid_t parent_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  size_t p = line.rfind(')');
  if (p == std::string::npos) return 0;
  char state;
  int ppid = 0;
  if (std::sscanf(line.c_str() + p + 1, " %c %d", &state, &ppid) != 2) return 0;
  return ppid;
}

bool pid_exists(pid_t pid) {
  return ::access(("/proc/" + std::to_string(pid)).c_str(), F_OK) == 0;
}

// Every member's chain, every checksum: nothing is touched unless the
// restore can read it all. The root must run the checkpointed program.
Status verify_job(const PauseOptions& opts, uint64_t gen, const image::JobMeta& job) {
  const pid_t root = job.members[0].pid;
  for (const image::JobMember& m : job.members) {
    if (m.zombie()) continue;
    auto chain = image::open_chain(opts.dir, gen, [&](uint64_t g) {
      return image::member_dir(image::generation_dir(opts.dir, g), m.pid, root);
    });
    if (!chain.ok()) return proc::name_member(chain.error(), m.pid, job.members.size());
    for (const auto& link : chain->links)
      if (Status v = link->verify_all(); !v.ok())
        return proc::name_member(v.error(), m.pid, job.members.size());
    if (m.pid == root) {
      const std::string exe = read_link_or_empty("/proc/" + std::to_string(root) + "/exe");
      if (exe.empty()) return make_error(ESRCH, "no process " + std::to_string(root));
      if (exe != chain->newest().mm.exe_path)
        return make_error(EINVAL, "PID " + std::to_string(root) + " runs " + exe +
                                      ", the checkpoint is of " + chain->newest().mm.exe_path);
    }
  }
  return {};
}

// Refused while a PID of the checkpointed job is a process outside the
// running job (`running`): the restore could not have it.
Status check_pids_available(const std::set<pid_t>& running, const image::JobMeta& job) {
  for (const image::JobMember& m : job.members)
    if (!running.count(m.pid) && pid_exists(m.pid))
      return make_error(EBUSY, "PID " + std::to_string(m.pid) +
                                   " of the checkpointed job is now a process outside the job: "
                                   "not rolled back (the job runs on untouched)");
  return {};
}

// The PIDs are free once reaped: members by their (dead) parents' reaper,
// the root by its own parent (the shell that started it). Waits for every
// PID of `gone` to be free, up to 10 s.
Status wait_reaped(const std::set<pid_t>& gone, const std::string& dir) {
  const double deadline = now_seconds() + 10;
  for (;;) {
    pid_t left = 0;
    for (pid_t p : gone)
      if (pid_exists(p)) {
        left = p;
        break;
      }
    if (!left) return {};
    if (now_seconds() > deadline)
      return make_error(EBUSY, "the job was ended for the rollback, but PID " +
                                   std::to_string(left) + " was not reaped within 10 s (parent " +
                                   std::to_string(parent_of(left)) +
                                   "): restore it with cr_restart --dir " + dir);
    ::usleep(10000);
  }
}

}  // namespace

Result<PauseStats> pause_job_by_restart(const PauseOptions& opts, uint64_t gen,
                                        const image::JobMeta& job) {
  const double t0 = now_seconds();
  PauseStats st;
  st.generation = gen;
  st.how = "restart";
  const pid_t root = job.members[0].pid;
  if (root != opts.pid)
    return make_error(EINVAL, opts.dir + " holds checkpoints of the job of PID " +
                                  std::to_string(root) + ", not of " + std::to_string(opts.pid));
  CKPT_TRY(verify_job(opts, gen, job));

  CKPT_ASSIGN(std::unique_ptr<job::FrozenJob> frozen, job::FrozenJob::freeze(opts.pid, true));
  std::set<pid_t> running;
  for (const proc::Member& m : frozen->members()) running.insert(m.pid);
  CKPT_TRY(check_pids_available(running, job));
  // Memory and registers could be rolled back in place; what members share
  // (queued pipe and socket data, ptys, shared offsets) and the member set
  // could not, in general: the job is ended and restored.
  const double tf = now_seconds();
  std::set<pid_t> gone = running;
  for (const image::JobMember& m : job.members) gone.insert(m.pid);
  CKPT_TRY(frozen->kill());
  frozen.reset();
  CKPT_TRY(wait_reaped(gone, opts.dir));
  st.reap_seconds = now_seconds() - tf;
  const double tr = now_seconds();
  RestoreOptions ro;
  ro.dir = opts.dir;
  ro.generation = gen;
  ro.log = opts.log;
  auto rs = restore_process(ro);
  if (!rs.ok())
    return rs.error().context(
        "the job was ended for the rollback, but its restore failed "
        "(cr_restart --dir " +
        opts.dir + " retries)");
  st.restore_seconds = now_seconds() - tr;
  st.method = "restart";
  st.pid = rs->pid;
  st.processes = rs->processes;
  st.pages_written = rs->pages_written;
  st.frozen_seconds = now_seconds() - tf;
  st.seconds = now_seconds() - t0;
  return st;
}

}  // namespace ckpt::pause
