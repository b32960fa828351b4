#include "dirty/pagemap_query.hpp"

namespace ckpt::dirty {

std::vector<Range> kernel_pieces(const std::vector<proc::MapEntry>& maps,
                                 const image::VmaRecord& v) {
  std::vector<Range> out;
  auto it = std::lower_bound(maps.begin(), maps.end(), v.start,
                             [](const proc::MapEntry& m, uint64_t a) { return m.end <= a; });
  for (; it != maps.end() && it->start < v.end; ++it) {
    uint64_t s = std::max(it->start, v.start), e = std::min(it->end, v.end);
    if (s < e) out.push_back(Range{s, e - s});
  }
  return out;
}

}  // namespace ckpt::dirty
