// Freezes every thread of every member of a job before any state is read,
// and releases them all together. Processes forked or exiting while we
// freeze are caught by listing the job again until the list is stable.
#pragma once

#include <ckpt/result.hpp>
#include <memory>
#include <vector>

#include "proc/freeze.hpp"
#include "proc/tree.hpp"

namespace ckpt::job {

class FrozenJob {
 public:
  static Result<std::unique_ptr<FrozenJob>> freeze(pid_t root, bool tree);
  ~FrozenJob() { (void)release(); }

  // Members in pre-order, the root first. Zombies are members but hold no
  // FrozenProcess (a zombie cannot be traced; nothing of it runs).
  const std::vector<proc::Member>& members() const { return members_; }
  // The frozen process of members()[i], or nullptr for a zombie.
  const proc::FrozenProcess* process(size_t i) const { return frozen_[i].get(); }

  Status release();
  // Kills every member (the root last) and reaps the ptrace links.
  Status kill();

 private:
  std::vector<proc::Member> members_;
  std::vector<std::unique_ptr<proc::FrozenProcess>> frozen_;
};

}  // namespace ckpt::job
