// The kmod tracker: the ckpt_dirty kernel module (kmod/), which shadows the
// PTE dirty bits of the target. The application takes no fault: the CPU
// marks the PTE on the first write, and a collect reads and resets those bits
// (plus what the module learned from MMU notifiers and get_user_pages
// writers). Interface: kmod/include/uapi/ckpt_dirty.h.
//
// State kept between tool runs: the module tracks the address space itself,
// so tracking survives the tool. TrackerState::target_fd holds the module's
// session token (1 .. 2^31-1; not a descriptor): each collect consumes the
// token and returns the next one, which goes into the new generation's
// metadata. A token that is not the module's newest (another chain re-armed
// the process, or a checkpoint that collected was never committed), an
// address space the module does not track (exec, a new process under the same
// PID, never armed, module reloaded) or a missing module all make collect()
// report `everything` and arm afresh.
//
// The caller must be the target's ptrace tracer (the module's permission
// check): checkpoints and restores always are.
//
// Which VMAs are asked about, and what is `unknown`, follows layout.hpp as
// for the other trackers; the module reports unpopulated pages as written
// (the checkpoint records them as empty), and shared or hugetlb memory
// whole.
#pragma once

#include <ckpt/check.hpp>

#include "dirty/tracker.hpp"

namespace ckpt::dirty {

class KmodTracker : public Tracker {
 public:
  TrackerKind kind() const override { return TrackerKind::kmod; }
  // /dev/ckpt_dirty present and speaking this build's interface version.
  static FeatureCheck probe();

  Status arm(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state) override;
  Result<DirtySet> collect(pid_t pid, const std::vector<image::VmaRecord>& vmas,
                           const std::vector<image::VmaRecord>& prev, TrackerState* state) override;
  // CKPT_DIRTY_IOC_STOP: the module forgets the process and its shadow bits.
  Result<bool> release(pid_t pid, const TrackerState& state) override;
};

}  // namespace ckpt::dirty
