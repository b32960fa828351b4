#include "job/freeze.hpp"

#include <algorithm>
#include <map>

namespace ckpt::job {

namespace {

bool same_pids(const std::vector<proc::Member>& a, const std::vector<proc::Member>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].pid != b[i].pid || a[i].zombie != b[i].zombie) return false;
  return true;
}

}  // namespace

Result<std::unique_ptr<FrozenJob>> FrozenJob::freeze(pid_t root, bool tree) {
  std::unique_ptr<FrozenJob> job(new FrozenJob);
  std::map<pid_t, std::unique_ptr<proc::FrozenProcess>> held;
  // A member that is not frozen yet may fork or exit: freeze what the list
  // shows, list again, and stop when nothing changed. A frozen process can
  // neither fork nor exit on its own, so this converges unless something
  // outside keeps killing or the job keeps forking faster than we freeze.
  std::vector<proc::Member> list;
  for (int round = 0;; ++round) {
    if (round == 50)
      return make_error(EAGAIN, "the processes of the job under PID " + std::to_string(root) +
                                    " kept changing while being frozen");
    CKPT_ASSIGN(std::vector<proc::Member> now, proc::list_job(root, tree));
    bool changed = !same_pids(now, list);
    for (const proc::Member& m : now) {
      if (m.zombie || held.count(m.pid)) continue;
      auto fp = proc::FrozenProcess::freeze(m.pid);
      if (!fp.ok()) {
        if (fp.error().code == ESRCH && m.pid != root) {
          changed = true;  // exited meanwhile: list again
          continue;
        }
        return fp.error();
      }
      held.emplace(m.pid, std::move(*fp));
      changed = true;
    }
    // Members that are gone (or became zombies) let go of their hold.
    for (auto it = held.begin(); it != held.end();) {
      auto m = std::find_if(now.begin(), now.end(),
                            [&](const proc::Member& x) { return x.pid == it->first; });
      if (m == now.end() || m->zombie) {
        it = held.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    list = std::move(now);
    if (!changed) break;
  }
  // Fields read before a member was frozen (its group, its parent) may have
  // changed: the last listing was taken with every member frozen.
  job->members_ = list;
  for (const proc::Member& m : list) {
    auto it = held.find(m.pid);
    job->frozen_.push_back(it == held.end() ? nullptr : std::move(it->second));
  }
  return job;
}

Status FrozenJob::release() {
  Status result;
  for (auto& fp : frozen_)
    if (fp) {
      Status s = fp->release();
      if (!s.ok() && result.ok()) result = s;
    }
  return result;
}

Status FrozenJob::kill() {
  Status result;
  for (size_t i = frozen_.size(); i-- > 0;)
    if (frozen_[i]) {
      Status s = frozen_[i]->kill();
      if (!s.ok() && result.ok()) result = s;
    }
  return result;
}

}  // namespace ckpt::job
