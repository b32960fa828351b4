// One interface for every way of learning which pages a process wrote since
// the previous checkpoint. Contract: no false negatives, ever. A backend
// that cannot vouch for a range (new mapping, lost state, kernel refusal)
// reports it in `unknown`, and the checkpoint then saves all of it.
//
// Life cycle, with the target frozen unless said otherwise:
//   full checkpoint:    arm()            start tracking from this instant
//   incremental:        before_freeze()  (running) optional work that keeps
//                                         the collect small
//                       collect()        what changed since arm()/collect(),
//                                         and tracking restarts from now
//   every read:         filter()         a backend that judges pages by
//                                         content (hash) sees each page read
//                                         before the writer does
#pragma once

#include <sys/types.h>

#include <array>
#include <ckpt/check.hpp>
#include <ckpt/result.hpp>
#include <ckpt/tracker.hpp>
#include <memory>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "image/writer.hpp"
#include "mem/range.hpp"

namespace ckpt::dirty {

constexpr uint64_t kPage = image::kPageSize;

struct DirtySet {
  std::vector<mem::Range> written;  // pages written since the last arm/collect
  std::vector<mem::Range> unknown;  // ranges the backend cannot vouch for: all dirty
  bool everything = false;          // tracking was lost (exec, closed uffd...): full save
  std::string reason;               // why `everything`, for the stats
  // The backend sees no writes (hash): every populated page is read, and
  // its filter() decides which of them the generation keeps.
  bool read_all = false;
};

// Between the read of a generation's pages and its writer: passes on the
// pages worth writing, and at the end records what it learned.
class ContentFilter {
 public:
  virtual ~ContentFilter() = default;
  virtual Status add(uint64_t vaddr, const uint8_t* data, size_t npages) = 0;
  // All pages were read; `vmas` is the layout, `complete` the generation's
  // ranges restored as freshly mapped.
  virtual void finish(const std::vector<image::VmaRecord>& vmas,
                      std::vector<image::MemRange>* complete) = 0;
  // Pages read but not passed on: the parent generation has them as they are.
  virtual uint64_t pages_unchanged() const { return 0; }
};

// What a backend may keep between tool runs lives in the image's metadata.
struct TrackerState {
  // pagemap-scan: the userfaultfd kept open inside the target; kmod: the
  // module's session token (not a descriptor); -1: nothing.
  int32_t target_fd = -1;
  // arm() for a process just restored from the newest generation, whose
  // metadata `target_fd` came from: continue that chain (kmod keeps its token).
  bool continue_chain = false;
  // The generation this arm/collect belongs to and, for a collect, the one
  // its dirty set is relative to (pagemap-scan checks both against its
  // ledger: dirty/ledger.hpp).
  std::array<uint8_t, 16> chain_id{};
  uint64_t generation = 0, prev_generation = 0;
  // arm(): this full records its pages' hashes (wants_full_hashes()).
  bool full_hashes = false;
};

class Tracker {
 public:
  virtual ~Tracker() = default;
  virtual TrackerKind kind() const = 0;
  const TrackerInfo& info() const;
  const char* name() const { return info().name; }
  // Starts tracking every VMA in `vmas` (the layout just checkpointed).
  virtual Status arm(pid_t pid, const std::vector<image::VmaRecord>& vmas, TrackerState* state) = 0;
  // Frozen, before an arm() that may then run while the process runs (the
  // first round of a live full): sets up what needs the process stopped
  // (pagemap-scan: the userfaultfd created inside it) and returns true; the
  // next arm() of this object for `state` then tracks from the instant it
  // returns, whatever the process did meanwhile. False (the default): arm()
  // must run frozen.
  virtual Result<bool> install(pid_t pid, TrackerState* state) {
    (void)pid;
    (void)state;
    return false;
  }
  // Whether a full checkpoint should record its pages' hashes for this
  // tracker's first collect (see before_freeze).
  virtual bool wants_full_hashes() const { return false; }
  // While the process still runs, before the freeze of the incremental whose
  // collect follows on this same object: `parent_hashes` is the parent
  // generation's page-hash table (empty when it has none). Best effort: what
  // it could not do, the collect covers by saving more. Default: nothing.
  virtual void before_freeze(pid_t pid, const std::vector<image::PageHash>& parent_hashes,
                             const TrackerState& state) {
    (void)pid;
    (void)parent_hashes;
    (void)state;
  }
  // While the process runs: about how many bytes of its memory read as
  // written now, a hint for how much the next collect reports (the copy's
  // buffers are faulted in before the freeze). Changes nothing. Default: 0,
  // unknown.
  virtual uint64_t written_estimate(pid_t pid, const TrackerState& state) {
    (void)pid;
    (void)state;
    return 0;
  }
  // Pages written since the last arm/collect within `vmas` (the current
  // layout), then re-arms. `prev` is the layout of the previous generation.
  virtual Result<DirtySet> collect(pid_t pid, const std::vector<image::VmaRecord>& vmas,
                                   const std::vector<image::VmaRecord>& prev,
                                   TrackerState* state) = 0;
  // Ends tracking and removes what arm() left in or for the (frozen)
  // process, so that it is as it was before, and another tool may take it
  // over: true when something was removed, false when nothing of this
  // tracker was there (already lost). The chain's next collect reports the
  // tracking lost and saves everything. Default: nothing to remove.
  virtual Result<bool> release(pid_t pid, const TrackerState& state) {
    (void)pid;
    (void)state;
    return false;
  }
  // What every page read for this generation goes through before `writer`;
  // `prev` is the parent generation's page-hash table (empty for a full);
  // the filter refers to it, so it must outlive the filter.
  // nullptr (the default): pages go straight to the writer.
  virtual std::unique_ptr<ContentFilter> filter(const std::vector<image::PageHash>& prev,
                                                image::SnapshotWriter& writer) {
    (void)prev;
    (void)writer;
    return nullptr;
  }
};

// `opts`: the caller's choices where the tracker has any (pagemap-scan).
std::unique_ptr<Tracker> make_tracker(TrackerKind kind, const TrackingOptions& opts = {});
// nullptr for a name that is no tracker.
std::unique_ptr<Tracker> make_tracker(const std::string& name, const TrackingOptions& opts = {});
// Whether `kind` works on this kernel, and why (or why not).
FeatureCheck probe_tracker(TrackerKind kind);

}  // namespace ckpt::dirty
