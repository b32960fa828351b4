#include "dirty/layout.hpp"

#include <algorithm>
#include <string>

namespace ckpt::dirty {

Kind classify(const VmaRecord& v) {
  if (v.is_special()) return Kind::kSkip;
  if (v.flags & image::kVmaShared) return v.is_file() ? Kind::kSkip : Kind::kUnknown;
  if (v.name.find("anon_hugepage") != std::string::npos) return Kind::kUnknown;
  if (v.size() > kMaxTrackedBytes) return Kind::kUnknown;
  return v.is_file() ? Kind::kFile : Kind::kAnon;
}

// Same kind of memory at the same place: a page of `a` that lay in `b` at the
// previous checkpoint has a comparable history.
bool same_kind(const VmaRecord& a, const VmaRecord& b) {
  if (a.flags != b.flags || a.name != b.name) return false;
  if (!a.is_file()) return true;
  return a.dev == b.dev && a.ino == b.ino && a.file_size == b.file_size &&
         a.mtime_ns == b.mtime_ns && a.pgoff - a.start == b.pgoff - b.start;
}

// Sorts and merges overlapping or touching ranges.
void normalize(std::vector<Range>& v) {
  std::sort(v.begin(), v.end(), [](const Range& a, const Range& b) { return a.addr < b.addr; });
  std::vector<Range> out;
  for (const Range& r : v) {
    if (r.len == 0) continue;
    if (!out.empty() && r.addr <= out.back().end())
      out.back().len = std::max(out.back().end(), r.end()) - out.back().addr;
    else
      out.push_back(r);
  }
  v.swap(out);
}

// a - b, both normalized.
std::vector<Range> subtract(const std::vector<Range>& a, const std::vector<Range>& b) {
  std::vector<Range> out;
  size_t j = 0;
  for (Range r : a) {
    uint64_t pos = r.addr;
    while (j < b.size() && b[j].end() <= pos) ++j;
    for (size_t k = j; k < b.size() && b[k].addr < r.end(); ++k) {
      if (b[k].addr > pos) out.push_back(Range{pos, b[k].addr - pos});
      pos = std::max(pos, b[k].end());
    }
    if (pos < r.end()) out.push_back(Range{pos, r.end() - pos});
  }
  return out;
}

// The part of [start, end) that no VMA of the same kind covered in `prev`.
std::vector<Range> uncovered(const VmaRecord& v, const std::vector<VmaRecord>& prev) {
  std::vector<Range> covered;
  for (const VmaRecord& p : prev)
    if (p.end > v.start && p.start < v.end && same_kind(v, p))
      covered.push_back(
          Range{std::max(p.start, v.start), std::min(p.end, v.end) - std::max(p.start, v.start)});
  normalize(covered);
  return subtract({Range{v.start, v.size()}}, covered);
}

}  // namespace ckpt::dirty
