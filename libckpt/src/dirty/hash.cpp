#include "dirty/hash.hpp"

#include "util/hash.hpp"

namespace ckpt::dirty {

using image::kPageSize;

Status HashTracker::arm(pid_t, const std::vector<image::VmaRecord>&, TrackerState* state) {
  state->target_fd = -1;
  return {};
}

Result<DirtySet> HashTracker::collect(pid_t, const std::vector<image::VmaRecord>&,
                                      const std::vector<image::VmaRecord>&, TrackerState*) {
  DirtySet ds;
  ds.read_all = true;
  return ds;
}

std::unique_ptr<ContentFilter> HashTracker::filter(const std::vector<image::PageHash>& prev,
                                                   image::SnapshotWriter& writer) {
  return std::make_unique<HashFilter>(prev, writer);
}

Status HashFilter::add(uint64_t vaddr, const uint8_t* data, size_t npages) {
  size_t run_start = 0, run_len = 0;  // a stretch of changed pages to write
  for (size_t i = 0; i < npages; ++i) {
    const uint64_t va = vaddr + i * kPageSize;
    const uint64_t h = xxh3(data + i * kPageSize, kPageSize);
    now_.push_back({va, h});
    while (cursor_ < prev_.size() && prev_[cursor_].vaddr < va) ++cursor_;
    bool same = cursor_ < prev_.size() && prev_[cursor_].vaddr == va && prev_[cursor_].hash == h;
    if (same) {
      ++unchanged_;
      if (run_len)
        CKPT_TRY(writer_.add_pages(vaddr + run_start * kPageSize, data + run_start * kPageSize,
                                   run_len));
      run_len = 0;
      continue;
    }
    if (run_len == 0) run_start = i;
    ++run_len;
  }
  if (run_len)
    CKPT_TRY(
        writer_.add_pages(vaddr + run_start * kPageSize, data + run_start * kPageSize, run_len));
  return {};
}

void HashFilter::finish(const std::vector<image::VmaRecord>& vmas,
                        std::vector<image::MemRange>* complete) {
  size_t j = 0, v = 0;
  for (const image::PageHash& p : prev_) {
    while (j < now_.size() && now_[j].vaddr < p.vaddr) ++j;
    if (j < now_.size() && now_[j].vaddr == p.vaddr) continue;  // still populated
    while (v < vmas.size() && vmas[v].end <= p.vaddr) ++v;
    if (v == vmas.size() || vmas[v].start > p.vaddr || vmas[v].is_special()) continue;
    if (!complete->empty() && complete->back().end == p.vaddr)
      complete->back().end += kPageSize;
    else
      complete->push_back({p.vaddr, p.vaddr + kPageSize});
  }
  writer_.set_page_hashes(std::move(now_));
}

}  // namespace ckpt::dirty
