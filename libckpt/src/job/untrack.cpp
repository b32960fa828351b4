// untrack(): hands a tracked process (or job) back clean (ckpt/ckpt.hpp).
// The newest generation says which processes the chain tracks, with which
// tracker and through which descriptor; they are frozen together so that no
// member runs while another is being changed, then each tracker removes
// what it left.
#include <ckpt/ckpt.hpp>
#include <map>

#include "dirty/tracker.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "job/freeze.hpp"

namespace ckpt {

Result<UntrackStats> untrack(const std::string& dir) {
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + dir);
  const std::string gen_dir = image::generation_dir(dir, gens.back());
  CKPT_ASSIGN(image::JobMeta job, image::read_job_or_root(gen_dir));
  const pid_t root = job.members.at(0).pid;
  UntrackStats stats;

  std::map<pid_t, dirty::TrackerState> held;  // member -> what its tracker keeps
  for (const image::JobMember& m : job.members) {
    if (m.zombie()) continue;
    CKPT_ASSIGN(auto reader, image::SnapshotReader::open(image::member_dir(gen_dir, m.pid, root)));
    stats.tracker = reader->meta().tracker;
    dirty::TrackerState st;
    st.target_fd = reader->meta().tracker_fd;
    held[m.pid] = st;
  }
  auto tracker = dirty::make_tracker(stats.tracker);
  if (!tracker || !tracker->info().kernel) return stats;  // nothing is kept in the process

  CKPT_ASSIGN(auto frozen, job::FrozenJob::freeze(root, job.members.size() > 1));
  for (size_t i = 0; i < frozen->members().size(); ++i) {
    const pid_t pid = frozen->members()[i].pid;
    auto it = held.find(pid);
    if (!frozen->process(i) || it == held.end()) continue;  // not tracked by this chain
    ++stats.processes;
    Result<bool> r = tracker->release(pid, it->second);
    if (!r.ok()) return r.error().context("PID " + std::to_string(pid));
    stats.released += *r ? 1 : 0;
  }
  CKPT_TRY(frozen->release());
  return stats;
}

}  // namespace ckpt
