// What the dirty trackers share about memory layouts: which VMAs a tracker
// can vouch for, and which parts of a VMA are new since the previous
// checkpoint (those are always saved whole).
#pragma once

#include <vector>

#include "image/model.hpp"
#include "mem/range.hpp"

namespace ckpt::dirty {

using image::VmaRecord;
using mem::Range;

// Memory larger than this is reported unknown rather than tracked.
constexpr uint64_t kMaxTrackedBytes = 64ull << 30;

enum class Kind {
  kSkip,     // not reported: the file or the kernel holds the content
  kUnknown,  // always `unknown`
  kAnon,     // private anonymous: tracked
  kFile,     // private file mapping: tracked
};
Kind classify(const VmaRecord& v);

// Same kind of memory at the same place: a page of `a` that lay in `b` at the
// previous checkpoint has a comparable history.
bool same_kind(const VmaRecord& a, const VmaRecord& b);
// Sorts and merges overlapping or touching ranges.
void normalize(std::vector<Range>& v);
// a - b, both normalized.
std::vector<Range> subtract(const std::vector<Range>& a, const std::vector<Range>& b);
// The part of `v` that no VMA of the same kind covered in `prev`.
std::vector<Range> uncovered(const VmaRecord& v, const std::vector<VmaRecord>& prev);

}  // namespace ckpt::dirty
