// Which pages of a range hold data worth saving, from /proc/PID/pagemap, so
// never-populated (sparse) memory is never read.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

#include "mem/range.hpp"
#include "util/fd.hpp"

namespace ckpt::mem {

enum class PageSelect {
  kPopulated,      // present or swapped: anonymous memory
  kPrivateCopies,  // pages that no longer match the file: COW copies, present or swapped
};

class Pagemap {
 public:
  static Result<Pagemap> open(pid_t pid);
  // Appends the selected pages of [start, end) to `out` as merged ranges,
  // none of which merges with a range appended before this call.
  Status select(uint64_t start, uint64_t end, PageSelect sel, std::vector<Range>& out);

 private:
  UniqueFd fd_;
  std::vector<uint64_t> buf_;
};

}  // namespace ckpt::mem
