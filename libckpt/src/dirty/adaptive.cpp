#include "dirty/adaptive.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "dirty/ledger.hpp"

namespace ckpt::dirty {

namespace {

// Pages of `w` (sorted, from index *i on) inside [start, end); advances *i
// past ranges that end before `end`.
uint64_t pages_within(const std::vector<mem::Range>& w, size_t* i, uint64_t start, uint64_t end) {
  while (*i < w.size() && w[*i].end() <= start) ++*i;
  uint64_t bytes = 0;
  for (size_t k = *i; k < w.size() && w[k].addr < end; ++k)
    bytes += std::min(w[k].end(), end) - std::max(w[k].addr, start);
  return bytes / kPage;
}

// The pages of block [start, end) protected to measure it: kSampleChunks
// runs of kSampleChunkPages, spread evenly, so a sweep through any part of
// the block shows.
constexpr uint64_t kSampleChunks = 4, kSampleChunkPages = 8;
std::vector<mem::Range> sample_of(uint64_t start, uint64_t end) {
  std::vector<mem::Range> out;
  const uint64_t pages = (end - start) / kPage;
  for (uint64_t k = 0; k < kSampleChunks; ++k) {
    const uint64_t first = start + (pages * k / kSampleChunks) * kPage;
    const uint64_t last = std::min(end, first + kSampleChunkPages * kPage);
    if (first < last) mem::append_range(out, first, last - first);
  }
  return out;
}

}  // namespace

void AdaptiveTracking::load(pid_t pid, const TrackerState& s) {
  prev_.clear();
  content_.clear();
  has_content_ = false;
  if (!opts_.enabled) return;
  auto text = read_side_state(pid, ".adaptive", s);
  if (text) parse(*text);  // else none, or of another parent: start afresh
  if (auto c = read_side_state(pid, kContentSuffix, s)) {
    has_content_ = true;
    content_ = parse_block_content(*c);
  }
}

std::string format_block_content(const BlockContentMap& blocks) {
  std::string text;
  char line[64];
  for (const auto& [addr, b] : blocks) {
    std::snprintf(line, sizeof line, "%" PRIx64 " %u %u\n", addr, b.read, b.changed);
    text += line;
  }
  return text;
}

BlockContentMap parse_block_content(const std::string& text) {
  BlockContentMap out;
  for (size_t at = 0; at < text.size();) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    char line[64];
    const size_t n = std::min(eol - at, sizeof line - 1);
    std::memcpy(line, text.data() + at, n);
    line[n] = 0;
    uint64_t addr;
    unsigned read, changed;
    if (std::sscanf(line, "%" SCNx64 " %u %u", &addr, &read, &changed) != 3) break;
    out[addr] = BlockContent{read, changed};
    at = eol + 1;
  }
  return out;
}

void AdaptiveTracking::carry_over(pid_t pid) {
  prev_.clear();
  if (!opts_.enabled || !opts_.carry_over) return;
  if (auto text = read_side_state_any_chain(pid, ".adaptive")) parse(*text);
}

void AdaptiveTracking::parse(const std::string& text) {
  // Line by line: sscanf over the whole rest of the text measures all of it
  // at every call, quadratic in the number of blocks.
  for (size_t at = 0; at < text.size();) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    char line[96];
    const size_t n = std::min(eol - at, sizeof line - 1);
    std::memcpy(line, text.data() + at, n);
    line[n] = 0;
    uint64_t addr;
    unsigned backoff, left, sampled, heavy, strikes = 0, open = 0, calm = 0;
    if (std::sscanf(line, "%" SCNx64 " %u %u %u %u %u %u %u", &addr, &backoff, &left, &sampled,
                    &heavy, &strikes, &open, &calm) < 5)
      return;  // garbage: what was read so far stands (a hint only)
    prev_[addr] = BlockState{backoff,   left,         sampled != 0,
                             heavy,     sampled == 2, std::min(strikes, kMaxStrikes),
                             open != 0, calm};
    at = eol + 1;
  }
}

void AdaptiveTracking::save(pid_t pid, const TrackerState& s) const {
  if (!opts_.enabled) return;
  std::string text;
  char line[64];
  for (const auto& [addr, b] : next_) {
    std::snprintf(line, sizeof line, "%" PRIx64 " %u %u %u %u %u %u %u\n", addr, b.backoff, b.left,
                  b.fresh     ? 2u
                  : b.sampled ? 1u
                              : 0u,
                  b.heavy, b.strikes, b.open ? 1u : 0u, b.calm);
    text += line;
  }
  write_side_state(pid, ".adaptive", s, text);
}

std::vector<mem::Range> AdaptiveTracking::arm_piece(mem::Range piece,
                                                    const std::vector<mem::Range>* populated) {
  std::vector<mem::Range> protect;
  const bool fresh = populated && opts_.enabled && opts_.sampled_arm;
  size_t at = 0;
  for (uint64_t start = piece.addr; start < piece.end();) {
    const uint64_t end = std::min(piece.end(), (start & ~(kAdaptiveBlock - 1)) + kAdaptiveBlock);
    auto it = prev_.find(start);
    const bool was_hot = it != prev_.end() && (it->second.sampled || it->second.left);
    const bool dense = fresh && double(pages_within(*populated, &at, start, end)) >=
                                    opts_.hot_fraction * double((end - start) / kPage);
    const bool sample = opts_.enabled && (was_hot || dense) && end - start >= opts_.min_hot_bytes;
    if (sample) {
      next_[start] = BlockState{was_hot ? std::max(1u, it->second.backoff) : 1u, 0, true, 0, fresh};
      sampled_bytes_ += end - start;
      for (const mem::Range& c : sample_of(start, end)) mem::append_range(protect, c.addr, c.len);
    } else {
      mem::append_range(protect, start, end - start);
    }
    start = end;
  }
  return protect;
}

std::vector<uint64_t> AdaptiveTracking::hot_blocks() const {
  std::vector<uint64_t> out;
  for (const auto& [addr, b] : prev_)
    if (!b.sampled && b.left > 0) out.push_back(addr);
  return out;
}

std::vector<uint64_t> AdaptiveTracking::sampled_blocks() const {
  std::vector<uint64_t> out;
  for (const auto& [addr, b] : prev_)
    if (b.sampled && !b.fresh) out.push_back(addr);
  return out;
}

std::vector<mem::Range> AdaptiveTracking::sample_pages(uint64_t start, uint64_t end) {
  return sample_of(start, end);
}

std::vector<uint64_t> AdaptiveTracking::fresh_blocks() const {
  std::vector<uint64_t> out;
  for (const auto& [addr, b] : prev_)
    if (b.fresh && b.sampled) out.push_back(addr);
  return out;
}

bool AdaptiveTracking::sample_hot(uint64_t start, uint64_t end, const std::vector<mem::Range>& w,
                                  size_t* at) const {
  uint64_t pages = 0, got = 0;
  for (const mem::Range& c : sample_of(start, end)) {
    pages += c.len / kPage;
    got += pages_within(w, at, c.addr, c.end());
  }
  return pages && double(got) >= opts_.hot_fraction * double(pages);
}

BlockContent AdaptiveTracking::content_of(uint64_t start) const {
  auto it = content_.find(start & ~(kAdaptiveBlock - 1));
  return it == content_.end() ? BlockContent{} : it->second;
}

bool AdaptiveTracking::content_calm(uint64_t start, uint64_t end) const {
  if (!has_content_) return false;
  return double(content_of(start).changed) < opts_.hot_fraction * double((end - start) / kPage);
}

bool AdaptiveTracking::sample_calm(uint64_t start, uint64_t end, const ScanFn& scan) const {
  std::vector<mem::Range> w;
  for (const mem::Range& c : sample_of(start, end))
    if (scan(c.addr, c.end(), false, &w) != 0) return false;
  size_t at = 0;
  return !sample_hot(start, end, w, &at);
}

int AdaptiveTracking::collect_piece(mem::Range piece, const ScanFn& scan,
                                    std::vector<mem::Range>* written,
                                    const VerifiedBlocks* verified) {
  if (!opts_.enabled) return scan(piece.addr, piece.end(), true, written);
  // What reads as written, nothing protected yet.
  std::vector<mem::Range> w;
  if (int e = scan(piece.addr, piece.end(), false, &w)) return e;
  // Per block: stay unprotected, protect a sample of it, or protect it all.
  std::vector<mem::Range> protect, changed;
  size_t at = 0;
  for (uint64_t start = piece.addr; start < piece.end();) {
    const uint64_t end = std::min(piece.end(), (start & ~(kAdaptiveBlock - 1)) + kAdaptiveBlock);
    const Next next = settle_block(start, end, w, &at, verified, &changed);
    arm_block(next, start, end, &protect);
    start = end;
  }
  w.insert(w.end(), changed.begin(), changed.end());
  // Protect the rest. The target is stopped, so this finds what the first
  // scan found; its result is kept all the same (a write by the kernel on the
  // target's behalf, e.g. I/O in flight, must not slip between the two).
  for (const mem::Range& r : protect)
    if (int e = scan(r.addr, r.end(), true, &w)) return e;
  written->insert(written->end(), w.begin(), w.end());
  return 0;
}

AdaptiveTracking::Next AdaptiveTracking::settle_block(uint64_t start, uint64_t end,
                                                      const std::vector<mem::Range>& w, size_t* at,
                                                      const VerifiedBlocks* verified,
                                                      std::vector<mem::Range>* changed) {
  auto it = prev_.find(start);
  const BlockState* before = it == prev_.end() ? nullptr : &it->second;
  const bool was_hot = before && !before->sampled && before->left > 0;
  // Left unprotected in the interval now ending, whose content the next
  // collect learns from this generation's writer.
  const bool open = before && !before->fresh && (before->sampled || before->left > 0);
  const uint32_t strikes = strikes_after(start, end, before);
  const uint32_t calm = was_hot && content_calm(start, end) ? before->calm + 1 : 0;
  Next next = Next::kTrack;
  auto v = verified ? verified->find(start) : VerifiedBlocks::const_iterator{};
  if (verified && v != verified->end()) {
    // Protected whole while the program ran (fresh, sample calm): `w`
    // holds what it wrote since, and these pages differed from the full.
    changed->insert(changed->end(), v->second.begin(), v->second.end());
  } else if (was_hot) {
    next = settle_hot(start, *before, strikes, calm);
  } else if (before && before->sampled) {
    next = settle_sampled(start, end, *before, strikes, w, at);
  } else {
    next = settle_tracked(start, end, before, strikes, w, at);
  }
  remember_block(start, strikes, open, calm);
  return next;
}

uint32_t AdaptiveTracking::strikes_after(uint64_t start, uint64_t end,
                                         const BlockState* before) const {
  // The parent's writer, on the interval before, if the block was left
  // unprotected then: mostly changed (that paid) or not (to no use)?
  uint32_t strikes = before ? before->strikes : 0;
  if (has_content_ && before && before->open) {
    const BlockContent c = content_of(start);
    const double hot = opts_.hot_fraction * double((end - start) / kPage);
    if (double(c.changed) >= hot && strikes > 0) --strikes;
    if (double(c.changed) < hot) strikes = std::min(kMaxStrikes, strikes + 1);
  }
  return strikes;
}

AdaptiveTracking::Next AdaptiveTracking::settle_hot(uint64_t start, const BlockState& before,
                                                    uint32_t strikes, uint32_t calm) {
  if (calm >= 2) {
    // Unprotected, yet found unchanged twice in a row: tracked again (a
    // block written every other interval stays hot: a copy of its pages
    // costs the program less than a fault on each).
    return Next::kTrack;
  }
  if (before.left > 1) {
    next_[start] = BlockState{before.backoff, before.left - 1, false, 0, false, strikes};
    return Next::kHot;  // stays hot
  }
  // Its turn to be measured.
  next_[start] = BlockState{before.backoff, 0, true, 0, false, strikes};
  return Next::kSample;
}

AdaptiveTracking::Next AdaptiveTracking::settle_sampled(uint64_t start, uint64_t end,
                                                        const BlockState& before, uint32_t strikes,
                                                        const std::vector<mem::Range>& w,
                                                        size_t* at) {
  // Only its sample was protected: the rest reads as written whatever the
  // program did, so the sample alone says how much of it was written.
  if (!sample_hot(start, end, w, at)) return Next::kTrack;  // calm: tracked page by page again
  // Still hot: longer between samples.
  uint32_t backoff = std::min(opts_.max_backoff, 2 * std::max(1u, before.backoff));
  next_[start] = BlockState{backoff, backoff, false, 0, false, strikes};
  return Next::kHot;
}

AdaptiveTracking::Next AdaptiveTracking::settle_tracked(uint64_t start, uint64_t end,
                                                        const BlockState* before, uint32_t strikes,
                                                        const std::vector<mem::Range>& w,
                                                        size_t* at) {
  // Protected during the interval just ended: `w` is what it wrote. A
  // block left hot to no use before must be heavy for longer.
  const uint32_t needed = opts_.hot_after + strikes;
  const uint64_t got = pages_within(w, at, start, end);
  const bool heavy = end - start >= opts_.min_hot_bytes &&
                     double(got) >= opts_.hot_fraction * double((end - start) / kPage);
  const uint32_t streak = heavy ? (before ? before->heavy : 0) + 1 : 0;
  if (heavy && streak >= needed) {
    next_[start] = BlockState{opts_.first_backoff, opts_.first_backoff, false, 0, false, strikes};
    return Next::kHot;
  }
  if (heavy && streak + 1 >= needed) {
    // The interval that confirms it is measured on a sample: a block
    // rewritten whole then faults 32 times instead of 512.
    next_[start] = BlockState{std::max(1u, opts_.first_backoff / 2), 0, true, 0, false, strikes};
    return Next::kSample;
  }
  if (heavy) next_[start] = BlockState{0, 0, false, streak, false, strikes};  // tracked, remembered
  return Next::kTrack;
}

void AdaptiveTracking::remember_block(uint64_t start, uint32_t strikes, bool open, uint32_t calm) {
  if (auto n = next_.find(start); n != next_.end()) {
    n->second.strikes = strikes;
    n->second.open = open;
    n->second.calm = n->second.left > 0 && !n->second.sampled ? calm : 0;
  } else if (strikes || open) {
    next_[start] = BlockState{0, 0, false, 0, false, strikes, open};  // tracked, remembered
  }
}

void AdaptiveTracking::arm_block(Next next, uint64_t start, uint64_t end,
                                 std::vector<mem::Range>* protect) {
  if (next == Next::kHot) {
    hot_bytes_ += end - start;
  } else if (next == Next::kSample) {
    sampled_bytes_ += end - start;
    for (const mem::Range& c : sample_of(start, end)) mem::append_range(*protect, c.addr, c.len);
  } else {
    mem::append_range(*protect, start, end - start);
  }
}

}  // namespace ckpt::dirty
