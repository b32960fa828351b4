// PagemapScanTracker::before_freeze: adaptive tracking's calm blocks
// (fresh, sampled or hot ones no longer written) protected and verified by
// content while the target still runs, so that the collect in the freeze
// trusts their protection instead of copying them whole.
#include <algorithm>
#include <optional>
#include <vector>

#include "dirty/adaptive.hpp"
#include "dirty/ledger.hpp"
#include "dirty/pagemap_query.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dirty/target_uffd.hpp"
#include "mem/reader.hpp"
#include "proc/maps.hpp"
#include "util/hash.hpp"
#include "util/zeros.hpp"

namespace ckpt::dirty {

using mem::Range;

namespace {

// The first entry of `hashes` (sorted by address) at or after `va`.
std::vector<image::PageHash>::const_iterator hash_at_or_after(
    const std::vector<image::PageHash>& hashes, uint64_t va) {
  return std::lower_bound(hashes.begin(), hashes.end(), va,
                          [](const image::PageHash& h, uint64_t a) { return h.vaddr < a; });
}

// Pages of `r` whose content differs from `hashes` (sorted by address),
// read from the target into `buf` (at least r.len bytes). A page the table
// lacks: with `complete` (a full's table) it was not populated then (zero),
// else it changed. A range that cannot be read changed.
void compare_with_hashes(mem::RemoteReader& reader, Range r,
                         const std::vector<image::PageHash>& hashes, std::vector<uint8_t>& buf,
                         std::vector<Range>* changed, bool complete = true) {
  if (!reader.read(&r, 1, buf.data()).ok()) {
    mem::append_range(*changed, r.addr, r.len);
    return;
  }
  static const uint64_t zero_hash = xxh3(zero_bytes(), kPage);
  auto it = hash_at_or_after(hashes, r.addr);
  for (uint64_t off = 0; off < r.len; off += kPage) {
    const uint64_t va = r.addr + off;
    while (it != hashes.end() && it->vaddr < va) ++it;
    const uint64_t h = xxh3(buf.data() + off, kPage);
    const bool same =
        it != hashes.end() && it->vaddr == va ? it->hash == h : complete && h == zero_hash;
    if (!same) mem::append_range(*changed, va, kPage);
  }
}

// A block to verify before the freeze. `complete`: the parent's table holds
// every populated page of it (a full's: fresh blocks).
struct Candidate {
  Range r;
  bool complete;
};

// The blocks to verify: fresh and sampled ones whose sample (protected)
// stayed calm; hot ones that the parent's writer found mostly unchanged and
// whose sample's content did not change since either (not written for two
// intervals: one written every other interval stays hot, its copy costs the
// program less than a fault per page).
std::vector<Candidate> calm_blocks(const AdaptiveTracking& adaptive,
                                   const std::vector<proc::MapEntry>& maps, Scanner& sc,
                                   mem::RemoteReader& reader,
                                   const std::vector<image::PageHash>& hashes,
                                   std::vector<uint8_t>& buf) {
  const ScanFn look = [&](uint64_t s, uint64_t e, bool, std::vector<Range>* out) {
    return sc.scan(s, e, kWrittenKeep, out);
  };
  // The block at `start` while it lies in one private anonymous mapping.
  auto block_at = [&](uint64_t start) -> std::optional<Range> {
    auto m = std::lower_bound(maps.begin(), maps.end(), start,
                              [](const proc::MapEntry& e, uint64_t a) { return e.end <= a; });
    if (m == maps.end() || m->start > start || !proc::private_anonymous(*m)) return std::nullopt;
    return Range{start, std::min(m->end, (start & ~(kAdaptiveBlock - 1)) + kAdaptiveBlock) - start};
  };
  // Whether a hot block's sample still holds, mostly, the content the parent
  // recorded (its pages read as written whatever the program did).
  auto content_calm = [&](Range b) {
    uint64_t pages = 0, changed = 0;
    for (const Range& c : AdaptiveTracking::sample_pages(b.addr, b.end())) {
      std::vector<Range> differ;
      compare_with_hashes(reader, c, hashes, buf, &differ, false);
      pages += c.len / kPage;
      for (const Range& d : differ) changed += d.len / kPage;
    }
    return adaptive.calm(changed, pages);
  };
  std::vector<Candidate> blocks;
  for (uint64_t start : adaptive.fresh_blocks())
    if (auto b = block_at(start); b && adaptive.sample_calm(b->addr, b->end(), look))
      blocks.push_back({*b, true});
  for (uint64_t start : adaptive.sampled_blocks())
    if (auto b = block_at(start); b && adaptive.sample_calm(b->addr, b->end(), look))
      blocks.push_back({*b, false});
  for (uint64_t start : adaptive.hot_blocks())
    if (auto b = block_at(start); b && adaptive.content_calm(b->addr, b->end()) && content_calm(*b))
      blocks.push_back({*b, false});
  return blocks;
}

// Protects block `c` whole, then finds its pages changed since the parent:
// those that read as written and are empty (if the parent had them; with a
// table that is not complete, whatever it had) and those that read as
// written and differ from the parent's hashes. The whole block when it
// cannot be protected or scanned (perhaps partly protected).
std::vector<Range> verify_block(Scanner& sc, mem::RemoteReader& reader,
                                const std::vector<image::PageHash>& hashes,
                                std::vector<uint8_t>& buf, const Candidate& c) {
  const Range& b = c.r;
  std::vector<Range> live, populated, changed;
  if (sc.protect_anon(b.addr, b.end(), &live) != 0 ||
      sc.scan(b.addr, b.end(), kPopulated, &populated) != 0)
    return {b};
  normalize(live);
  normalize(populated);
  for (const Range& r : subtract(live, populated))
    for (uint64_t va = r.addr; va < r.end(); va += kPage)
      if (auto h = hash_at_or_after(hashes, va);
          !c.complete || (h != hashes.end() && h->vaddr == va))
        mem::append_range(changed, va, kPage);
  for (const Range& r : subtract(live, subtract(live, populated)))
    compare_with_hashes(reader, r, hashes, buf, &changed, c.complete);
  normalize(changed);
  return changed;
}

}  // namespace

void PagemapScanTracker::before_freeze(pid_t pid, const std::vector<image::PageHash>& hashes,
                                       const TrackerState& state) {
  claim_.reset();
  verified_.clear();
  verified_bytes_ = 0;
  if (state.target_fd < 0 || !available().ok()) return;
  // The collect's ledger record, written now rather than in the freeze.
  const uint64_t token = claim_collect(pid, state);
  if (!token) return;
  claim_ = Claim{state, token};
  if (hashes.empty()) return;
  AdaptiveTracking adaptive(opts_.adaptive);
  adaptive.load(pid, state);
  if ((adaptive.fresh_blocks().empty() && adaptive.hot_blocks().empty() &&
       adaptive.sampled_blocks().empty()) ||
      !check_target_uffd(pid, state.target_fd).ok())
    return;
  auto pm = open_pagemap(pid);
  auto maps = proc::read_maps(pid);
  if (!pm.ok() || !maps.ok()) return;
  Scanner sc(pm->get(), regions_, opts_.huge.keep_huge);
  mem::RemoteReader reader(pid);
  std::vector<uint8_t> buf(kAdaptiveBlock);
  const std::vector<Candidate> blocks = calm_blocks(adaptive, *maps, sc, reader, hashes, buf);
  // From here on, pages get protected: the collect depends on what this
  // object learns, which the claim above guards.
  for (const Candidate& c : blocks) {
    verified_bytes_ += c.r.len;
    verified_[c.r.addr] = verify_block(sc, reader, hashes, buf, c);
  }
}

}  // namespace ckpt::dirty
