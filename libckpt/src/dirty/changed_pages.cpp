#include "dirty/changed_pages.hpp"

#include <algorithm>

#include "dirty/adaptive.hpp"
#include "util/hash.hpp"

namespace ckpt::dirty {

using image::kPageSize;

Status ChangedPagesFilter::add(uint64_t vaddr, const uint8_t* data, size_t npages) {
  // The capture hands pages over in ascending order; should a range come
  // back lower, the search restarts rather than missing an entry.
  if (!now_.empty() && vaddr <= now_.back().vaddr) cursor_ = 0;
  size_t run_start = 0, run_len = 0;  // a stretch of changed pages to write
  for (size_t i = 0; i < npages; ++i) {
    const uint64_t va = vaddr + i * kPageSize;
    const uint64_t h = xxh3(data + i * kPageSize, kPageSize);
    now_.push_back({va, h});
    while (cursor_ < prev_.size() && prev_[cursor_].vaddr < va) ++cursor_;
    const bool same =
        cursor_ < prev_.size() && prev_[cursor_].vaddr == va && prev_[cursor_].hash == h;
    BlockContent& b = blocks_[va & ~(kAdaptiveBlock - 1)];
    ++b.read;
    if (same) {
      ++unchanged_;
      if (run_len)
        CKPT_TRY(writer_.add_pages(vaddr + run_start * kPageSize, data + run_start * kPageSize,
                                   run_len));
      run_len = 0;
      continue;
    }
    ++b.changed;
    if (run_len == 0) run_start = i;
    ++run_len;
  }
  if (run_len)
    CKPT_TRY(
        writer_.add_pages(vaddr + run_start * kPageSize, data + run_start * kPageSize, run_len));
  return {};
}

void ChangedPagesFilter::finish(const std::vector<image::VmaRecord>&,
                                std::vector<image::MemRange>*) {
  std::sort(now_.begin(), now_.end(),
            [](const image::PageHash& a, const image::PageHash& b) { return a.vaddr < b.vaddr; });
  writer_.set_page_hashes(std::move(now_));
  if (done_) done_(blocks_);
}

}  // namespace ckpt::dirty
