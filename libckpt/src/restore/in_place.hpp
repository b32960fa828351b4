// Makes a process that already exists, stopped under our ptrace, hold the
// state of a chain's newest generation, changing only what differs. Used by
// cr_pause (a live process rolled back) and by cr_recv's warm restore (a
// process built from the first generation of a live migration, brought up
// to date generation by generation while the sender still pre-copies).
//
// A session: begin() maps a trampoline through the tracee's vdso; the steps
// run system calls through it; end() removes it, optionally loading the
// final registers at that last call's exit.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <ckpt/result.hpp>
#include <memory>
#include <vector>

#include "image/chain.hpp"
#include "mem/range.hpp"
#include "proc/inject.hpp"
#include "restore/address_space.hpp"
#include "util/fd.hpp"

namespace ckpt::restore {

struct InPlaceStats {
  uint64_t pages_compared = 0, pages_written = 0, pages_dropped = 0;
  uint64_t vmas_kept = 0, vmas_unmapped = 0, vmas_mapped = 0;
  uint64_t files_reopened = 0, files_closed = 0;
};

class InPlace {
 public:
  InPlace(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan, InPlaceStats* st);
  ~InPlace();

  Status begin();
  // Mappings the generation does not have are unmapped, missing ones mapped.
  Status fix_layout();
  // Page content. `candidates` (sorted, merged): the only ranges of kept
  // mappings that may differ (nullptr: all of them). compare: read each
  // candidate page back and rewrite it only if it differs; otherwise write
  // them all. New mappings get all their content.
  Status write_memory(const std::vector<mem::Range>* candidates, bool compare);
  // Candidate pages populated now that the generation does not hold: dropped.
  Status drop_new_pages(const std::vector<mem::Range>* candidates);
  Status set_mm();       // mm fields, keeping the executable
  Status set_signals();  // every disposition
  Status set_files();    // fds and offsets; fds not in the generation closed
  proc::RemoteSyscall& rs() { return *rs_; }
  restore::AddressSpaceBuilder& builder() { return *b_; }
  Status end(const user_regs_struct* final_regs);

 private:
  pid_t pid_;
  const image::Chain& chain_;
  const image::ImageMeta& meta_;
  const image::RestorePlan& plan_;
  InPlaceStats* st_;
  user_regs_struct base_{};
  std::unique_ptr<proc::RemoteSyscall> rs_;
  std::unique_ptr<restore::AddressSpaceBuilder> b_;
  UniqueFd mem_;
  std::vector<bool> keep_;
};

}  // namespace ckpt::restore
