// Adaptive write-protection for the pagemap-scan tracker.
//
// Tracking by write-protection costs the program one fault per page per
// interval. For memory it rewrites anyway every interval (a multigrid solver's
// grids) that buys nothing: the page is saved either way. So a 2 MiB block
// (clipped to its VMA) that was mostly written in the last `hot_after`
// intervals (tracked, so measured exactly) is left unprotected for the next
// ones ("hot"; one written once as a sweep passed by is not): its pages are
// not re-protected at collect, the program writes them at full speed, and
// every collect reports
// all of its pages that read as written (every page written since it was last
// protected, which covers all writes of the interval). After `backoff`
// unprotected intervals a sample of the block (4 runs of 8 pages, 1/16 of it)
// is protected for one interval ("sampled"): the next collect sees which of
// those the program really wrote and decides again, at 32 faults rather than
// 512. A block found hot again doubles its backoff (up to max_backoff), one
// that calmed down goes back to ordinary tracking. The last of the
// `hot_after` intervals that make a block hot is measured the same way.
//
// Safety does not depend on any of this: a page that is not protected reads
// as written, so whatever a block's state (or a state lost, stale or from
// another chain), a collect never misses a write; the state only decides
// which written pages get protected again. The state is kept between tool
// runs next to the tracking ledger (dirty/ledger.hpp), tagged with the
// generation whose collect wrote it; a collect of another parent ignores it.
//
// A new full checkpoint of a process tracked before (a new chain, same
// process) starts from the state the last collect left, whichever chain it
// belonged to: its hot blocks are armed on their sample only, so a program
// that rewrites most of its memory does not fault on every page of it again
// after each full (the first incremental saves those blocks whole).
//
// A full whose pages' hashes are recorded (TrackerState::full_hashes) arms
// every block on its sample ("fresh"): a program pays 32 faults per block
// instead of one per page it writes after the full. Before the first
// incremental's freeze, while the program runs, the blocks whose sample
// stayed calm are protected whole and their pages that read as written are
// read and compared with the full's hashes (PagemapScanTracker::prepare):
// a page whose content is the full's was not changed, a write after the
// protection shows at the collect. So that incremental stays as small as
// with every page protected. Blocks not verified (no prepare ran, the full's
// hashes are missing) are reported whole, as hot blocks are.
//
// Bounded. A hot block's pages all read as written, whether the program
// wrote them or not, so an incremental reads every page of every hot block.
// What it saves is bounded all the same: its pages go through
// dirty/changed_pages, which keeps only those whose content differs from the
// parent generation's page-hash table, and tells the next collect, per
// block, how many of the pages it read had changed. A hot block that the
// writer found changed on less than hot_fraction of its pages, and whose
// sample's content has not changed since, is protected whole before the
// next freeze and verified by content like a fresh block (pagemap_scan's
// before_freeze); a collect without that step protects it after two such
// intervals in a row, whatever its backoff. So a block that stops being
// written leaves the hot set within two intervals, is copied by one freeze
// after its last write and saved by none; one written every other interval
// stays hot (copying it costs the program less than a fault per page). Each interval in which a
// block was read mostly unchanged adds a strike (each mostly changed one takes one off,
// 0..kMaxStrikes); a block needs hot_after + strikes mostly-written intervals in a row to become
// hot, so where leaving it hot does not pay (a band that passes by, a writer that flips between
// phases) adaptivity turns itself off for that block.
//
// TrackingOptions::adaptive = false (cr_full/cr_incr --adaptive=off) turns
// adaptivity off (every written page is protected again; no content
// comparison).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dirty/changed_pages.hpp"
#include "dirty/tracker.hpp"
#include "mem/range.hpp"

namespace ckpt::dirty {

constexpr uint64_t kAdaptiveBlock = 2ull << 20;
// A block left hot to no use needs up to hot_after + 6 mostly-written
// intervals in a row before it is left hot again.
constexpr uint32_t kMaxStrikes = 6;

struct AdaptiveOptions {
  bool enabled = true;
  double hot_fraction = 0.5;   // written share of a block that makes it hot
  uint32_t hot_after = 2;      // consecutive mostly-written intervals before it is left hot
  uint32_t first_backoff = 2;  // unprotected intervals before the first sample
  uint32_t max_backoff = 16;
  // Smaller pieces (a VMA's clipped ends, small VMAs) are always tracked:
  // their faults cost little, and a quiet program's incrementals stay exact.
  uint64_t min_hot_bytes = kAdaptiveBlock / 2;
  bool carry_over = true;  // a new full arms from the last chain's state
  // A full with page hashes arms blocks on their sample.
  bool sampled_arm = true;
};

// The side file (dirty/ledger.hpp) in which an incremental's writer leaves
// what it found changed per block, for the next collect.
inline constexpr const char* kContentSuffix = ".content";
std::string format_block_content(const BlockContentMap& blocks);
BlockContentMap parse_block_content(const std::string& text);

// One block's state after a collect (only blocks that are not plain tracked).
struct BlockState {
  uint32_t backoff = 0;  // unprotected intervals granted when it last became hot
  uint32_t left = 0;     // hot: unprotected intervals left, counting the one running
  bool sampled = false;  // protected for one interval to measure it
  uint32_t heavy = 0;    // tracked: consecutive mostly-written intervals so far
  // Sampled since the full's arm: its other pages were never protected, and
  // the full's page hashes say what they held (see above).
  bool fresh = false;
  // Intervals it was left unprotected to no use (found mostly unchanged by
  // the writer), less those that paid (mostly changed), 0..kMaxStrikes:
  // each adds one to the mostly-written intervals it needs to be hot again.
  uint32_t strikes = 0;
  // Left unprotected (hot or sampled) in the interval that the generation of
  // the collect that wrote this state checkpointed.
  bool open = false;
  // Hot: intervals in a row the writer found it changed on less than
  // hot_fraction of its pages.
  uint32_t calm = 0;
};

// A verified fresh block: the pages whose content differs from the full's.
using VerifiedBlocks = std::map<uint64_t, std::vector<mem::Range>>;

// Scans [start, end) of the target for written pages, appending them to
// `out`; `protect`: protect them again. 0 or a negative errno.
using ScanFn =
    std::function<int(uint64_t start, uint64_t end, bool protect, std::vector<mem::Range>* out)>;

class AdaptiveTracking {
 public:
  explicit AdaptiveTracking(AdaptiveOptions o) : opts_(o) {}

  bool enabled() const { return opts_.enabled; }
  // The state the parent generation's collect left, for this process and
  // chain; empty when there is none that matches `s` (chain, prev_generation).
  void load(pid_t pid, const TrackerState& s);
  // Records the state for the generation in `s` (best effort).
  void save(pid_t pid, const TrackerState& s) const;
  // Arming: the state this process's last collect left, of any chain.
  void carry_over(pid_t pid);
  // Arming one VMA piece of private anonymous memory: the ranges to
  // protect, whole blocks or, for blocks the carried state found hot, their
  // sample (those are then measured by the first collect). With `populated`
  // (a full with page hashes: sorted populated ranges of the piece), also
  // every block at least hot_fraction populated: sparse memory gains nothing
  // from sampling and would only add blocks to verify.
  std::vector<mem::Range> arm_piece(mem::Range piece,
                                    const std::vector<mem::Range>* populated = nullptr);
  // The first addresses of the fresh blocks in the parent's state.
  std::vector<uint64_t> fresh_blocks() const;
  // ... of the blocks it left unprotected whole (hot), and of those it
  // protected on their sample only to measure them (not fresh).
  std::vector<uint64_t> hot_blocks() const;
  std::vector<uint64_t> sampled_blocks() const;
  // Whether the parent generation's writer found block [start, end)
  // changed on less than hot_fraction of its pages (false without that
  // record).
  bool content_calm(uint64_t start, uint64_t end) const;
  // The pages of block [start, end) a sample protects (4 runs of 8 pages).
  static std::vector<mem::Range> sample_pages(uint64_t start, uint64_t end);
  // Whether `changed` of `pages` sampled pages is less than hot.
  bool calm(uint64_t changed, uint64_t pages) const {
    return pages && double(changed) < opts_.hot_fraction * double(pages);
  }
  // Whether block [start, end)'s sample reads as written less than hot
  // (scanned through `scan`, which must not protect): worth verifying by
  // content. False on a scan error.
  bool sample_calm(uint64_t start, uint64_t end, const ScanFn& scan) const;

  // One VMA piece of private anonymous memory: appends the pages written since
  // they were last protected to `written` and protects what is not to stay
  // hot. 0 or a negative errno (then part of it may be protected: report it
  // all). Blocks in `verified` were protected whole before the freeze: what
  // reads as written now plus their changed pages is their dirty set.
  int collect_piece(mem::Range piece, const ScanFn& scan, std::vector<mem::Range>* written,
                    const VerifiedBlocks* verified = nullptr);

  // What the parent generation's writer found really changed per block
  // (dirty/changed_pages.hpp); load() reads it, tests set it.
  void set_content(BlockContentMap c) {
    content_ = std::move(c);
    has_content_ = true;
  }

  // Statistics of the last collect: bytes left unprotected, bytes sampled.
  uint64_t hot_bytes() const { return hot_bytes_; }
  uint64_t sampled_bytes() const { return sampled_bytes_; }
  const std::map<uint64_t, BlockState>& next() const { return next_; }
  void set_previous(std::map<uint64_t, BlockState> prev) { prev_ = std::move(prev); }

 private:
  void parse(const std::string& text);
  // Whether the sample of [start, end) reads as mostly written in `w`
  // (sorted; *at advances through it).
  bool sample_hot(uint64_t start, uint64_t end, const std::vector<mem::Range>& w, size_t* at) const;
  BlockContent content_of(uint64_t start) const;
  // collect_piece() one block at a time: what it does with a block until the
  // next collect (protect it whole, leave it unprotected, protect its
  // sample), decided from the block's state before and what `w` (sorted;
  // *at advances through it) says was written, and recorded in next_.
  enum class Next { kTrack, kHot, kSample };
  Next settle_block(uint64_t start, uint64_t end, const std::vector<mem::Range>& w, size_t* at,
                    const VerifiedBlocks* verified, std::vector<mem::Range>* changed);
  // The block's strikes, updated by what the parent's writer found if it
  // was left unprotected in the interval before.
  uint32_t strikes_after(uint64_t start, uint64_t end, const BlockState* before) const;
  // The decision for a block that was hot, sampled, or tracked.
  Next settle_hot(uint64_t start, const BlockState& before, uint32_t strikes, uint32_t calm);
  Next settle_sampled(uint64_t start, uint64_t end, const BlockState& before, uint32_t strikes,
                      const std::vector<mem::Range>& w, size_t* at);
  Next settle_tracked(uint64_t start, uint64_t end, const BlockState* before, uint32_t strikes,
                      const std::vector<mem::Range>& w, size_t* at);
  // Keeps the strikes, `open` and calm streak of a block in next_ (one
  // plain tracked only if there is something to keep).
  void remember_block(uint64_t start, uint32_t strikes, bool open, uint32_t calm);
  // Counts the block in the statistics and adds what to protect of it.
  void arm_block(Next next, uint64_t start, uint64_t end, std::vector<mem::Range>* protect);
  AdaptiveOptions opts_;
  BlockContentMap content_;
  bool has_content_ = false;
  std::map<uint64_t, BlockState> prev_, next_;  // keyed by the block's first address
  uint64_t hot_bytes_ = 0, sampled_bytes_ = 0;
};

}  // namespace ckpt::dirty
