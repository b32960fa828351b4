#include "migrate/admission.hpp"

#include <algorithm>

namespace ckpt::migrate {

Admission::Admission(size_t max_total, size_t max_per_source)
    : max_total_(std::max<size_t>(max_total, 1)),
      max_per_source_(std::max<size_t>(std::min(max_per_source, max_total), 1)) {}

size_t Admission::from(const std::string& source) const {
  auto it = per_source_.find(source);
  return it == per_source_.end() ? 0 : it->second;
}

void Admission::evict_oldest_of(const std::string& source, std::vector<uint64_t>* out) {
  for (auto it = order_.begin(); it != order_.end(); ++it) {
    if (it->source != source) continue;
    out->push_back(it->id);
    if (--per_source_[source] == 0) per_source_.erase(source);
    order_.erase(it);
    return;
  }
}

std::vector<uint64_t> Admission::admit(uint64_t id, const std::string& source) {
  std::vector<uint64_t> drop;
  if (from(source) >= max_per_source_) {
    evict_oldest_of(source, &drop);
  } else if (order_.size() >= max_total_) {
    // The source holding the most; among equals, the one whose oldest
    // connection is oldest (the first met in age order).
    std::string busiest;
    size_t most = 0;
    for (const Entry& e : order_) {
      size_t n = per_source_[e.source];
      if (n > most) {
        most = n;
        busiest = e.source;
      }
    }
    evict_oldest_of(busiest, &drop);
  }
  order_.push_back({id, source});
  ++per_source_[source];
  return drop;
}

void Admission::remove(uint64_t id) {
  for (auto it = order_.begin(); it != order_.end(); ++it) {
    if (it->id != id) continue;
    if (--per_source_[it->source] == 0) per_source_.erase(it->source);
    order_.erase(it);
    return;
  }
}

}  // namespace ckpt::migrate
