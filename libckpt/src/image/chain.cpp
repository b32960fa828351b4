#include "image/chain.hpp"

#include <algorithm>

#include "image/chain_link.hpp"
#include "image/store.hpp"

namespace ckpt::image {

Result<Chain> open_chain(const std::string& dir, uint64_t generation) {
  return open_chain(dir, generation, [&](uint64_t g) { return generation_dir(dir, g); });
}

Result<Chain> open_chain(const std::string& dir, uint64_t generation,
                         const std::function<std::string(uint64_t)>& files_dir) {
  Chain chain;
  uint64_t g = generation;
  for (;;) {
    auto r = SnapshotReader::open(files_dir(g));
    if (!r.ok()) {
      if (g != generation && r.error().code == ENOENT)
        return make_error(ENOENT, "generation " + std::to_string(generation) +
                                      " needs generation " + std::to_string(g) +
                                      ", which is missing from " + dir);
      return r.error();
    }
    const ImageMeta& m = (*r)->meta();
    CKPT_TRY(check_directory_holds(**r, g));
    if (!chain.links.empty()) CKPT_TRY(check_parent_link(*chain.links.back(), **r));
    if (!chain.links.empty() && m.chain_id != chain.newest().chain_id)
      return make_error(EBADMSG, "generation " + std::to_string(g) +
                                     " belongs to another chain than generation " +
                                     std::to_string(generation));
    uint64_t parent = m.parent_generation;
    chain.links.push_back(std::move(*r));
    if (parent == 0) break;
    if (parent >= g)
      return make_error(EBADMSG, "generation " + std::to_string(g) + " names parent " +
                                     std::to_string(parent) + " (not older)");
    g = parent;
  }
  return chain;
}

namespace {

// Disjoint, merged page intervals [start, end) keyed by start.
class IntervalSet {
 public:
  void add(uint64_t a, uint64_t b) {
    if (a >= b) return;
    auto it = m_.upper_bound(a);
    if (it != m_.begin() && std::prev(it)->second >= a) {
      --it;
      a = it->first;
      b = std::max(b, it->second);
      it = m_.erase(it);
    }
    while (it != m_.end() && it->first <= b) {
      b = std::max(b, it->second);
      it = m_.erase(it);
    }
    m_[a] = b;
  }
  // Calls f(x, y) for each maximal piece of [a, b) not in the set.
  template <class F>
  void for_each_gap(uint64_t a, uint64_t b, F f) const {
    auto it = m_.upper_bound(a);
    if (it != m_.begin() && std::prev(it)->second > a) a = std::prev(it)->second;
    while (a < b) {
      uint64_t stop = (it == m_.end()) ? b : std::min(b, it->first);
      if (a < stop) f(a, stop);
      if (it == m_.end() || it->first >= b) break;
      a = std::max(a, it->second);
      ++it;
    }
  }

 private:
  std::map<uint64_t, uint64_t> m_;
};

}  // namespace

RestorePlan plan_reverse_scan(const std::vector<const std::vector<PageRun>*>& links,
                              const std::vector<std::vector<MemRange>>& complete,
                              const std::vector<const std::vector<VmaRecord>*>& layouts) {
  const std::vector<VmaRecord>& vmas = *layouts.at(0);
  // Where content may go: every mapping but the kernel's special ones.
  std::vector<MemRange> targets;
  for (const VmaRecord& v : vmas)
    if (!v.is_special()) targets.push_back({v.start, v.end});
  std::sort(targets.begin(), targets.end(),
            [](const MemRange& a, const MemRange& b) { return a.start < b.start; });

  RestorePlan plan;
  IntervalSet resolved;
  for (size_t li = 0; li < links.size(); ++li) {
    const std::vector<PageRun>& runs = *links[li];
    for (const PageRun& run : runs) {
      const uint64_t a = run.vaddr, b = run.vaddr + run.bytes();
      uint64_t taken = 0;
      resolved.for_each_gap(a, b, [&](uint64_t x, uint64_t y) {
        auto t = std::upper_bound(targets.begin(), targets.end(), x,
                                  [](uint64_t v, const MemRange& r) { return v < r.end; });
        for (; t != targets.end() && t->start < y; ++t) {
          uint64_t s = std::max(x, t->start), e = std::min(y, t->end);
          if (s >= e) continue;
          PlanSlice sl;
          sl.vaddr = s;
          sl.npages = uint32_t((e - s) / kPageSize);
          sl.link = uint32_t(li);
          sl.run = &run;
          sl.first_page = uint32_t((s - a) / kPageSize);
          plan.slices.push_back(sl);
          taken += sl.npages;
        }
      });
      if (taken) plan.runs_used.push_back(&run);
      plan.pages_written += taken;
      plan.pages_skipped += run.npages - taken;
      resolved.add(a, b);
    }
    if (li < complete.size())
      for (const MemRange& c : complete[li]) resolved.add(c.start, c.end);
    if (li < layouts.size()) {
      // Unmapped at generation li: nothing older may show through there.
      std::vector<MemRange> mapped;
      for (const VmaRecord& v : *layouts[li]) mapped.push_back({v.start, v.end});
      std::sort(mapped.begin(), mapped.end(),
                [](const MemRange& a, const MemRange& b) { return a.start < b.start; });
      uint64_t at = 0;
      for (const MemRange& m : mapped) {
        if (m.start > at) resolved.add(at, m.start);
        at = std::max(at, m.end);
      }
      resolved.add(at, ~uint64_t(0) & ~(kPageSize - 1));
    }
  }
  std::sort(plan.slices.begin(), plan.slices.end(),
            [](const PlanSlice& x, const PlanSlice& y) { return x.vaddr < y.vaddr; });
  return plan;
}

RestorePlan plan_chain(const Chain& chain) {
  std::vector<const std::vector<PageRun>*> runs;
  std::vector<std::vector<MemRange>> complete;
  std::vector<const std::vector<VmaRecord>*> layouts;
  for (const auto& link : chain.links) {
    runs.push_back(&link->runs());
    complete.push_back(link->meta().complete);
    layouts.push_back(&link->meta().vmas);
  }
  return plan_reverse_scan(runs, complete, layouts);
}

}  // namespace ckpt::image
