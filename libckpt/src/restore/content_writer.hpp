// A restored process's memory content written from its chain: the plan's
// slices in batches (16 MiB or 1024 slices), each run's checksum matched
// before any of its bytes reaches the process (plain runs by the writer
// just before it copies them, compressed ones decoded and checked by other
// threads, batches ahead), by one writer or two (every other batch: faults
// in different places of one process proceed in parallel), through
// UFFDIO_COPY where the memory is anonymous without huge pages, else
// process_vm_writev.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <ckpt/result.hpp>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "image/chain.hpp"
#include "proc/inject.hpp"
#include "restore/address_space.hpp"
#include "restore/batch_verifier.hpp"

namespace ckpt::restore {

class ContentWriter {
 public:
  // `rs` runs the system calls the userfaultfd fill needs in the process.
  ContentWriter(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan,
                proc::RemoteSyscall& rs);
  Status write(const ProgressFn& progress, MemoryStats* stats);

 private:
  struct Batch {
    size_t first = 0, last = 0;  // slices [first, last)
  };
  // One writer's part: batches first, first + step, ... Its own counts;
  // the pages are the new process's, faulted in by the write.
  struct Part {
    Status st;
    MemoryStats counts;
    uint64_t done = 0;                     // content bytes copied
    std::set<const image::PageRun*> runs;  // checked by this writer (fused)
  };
  class Fill;

  void make_batches();
  // The page file's pages of batch b: read ahead for the next batch, page
  // tables of this one filled in one call rather than one fault per 64 KiB
  // as the check and the copy touch them.
  void prepare(size_t b) const;
  Status check_batch(size_t b, unsigned worker);
  void write_part(size_t first, size_t step, Part* part, bool report, const Fill& fill);
  Status write_batch(size_t b, Part* part, const Fill& fill, size_t* vma);
  // The decoded content of compressed runs whose last batch this was.
  void drop_done(size_t b);
  const uint8_t* content(const image::PlanSlice& sl) const;

  const pid_t pid_;
  const image::Chain& chain_;
  const std::vector<image::VmaRecord>& vmas_;
  const std::vector<image::PlanSlice>& slices_;
  proc::RemoteSyscall& rs_;
  std::vector<Batch> batches_;
  // A compressed run's decompressed content (kept by its reader once
  // verified) is freed after the last batch that copies from it.
  std::map<const image::PageRun*, size_t> last_use_;
  bool compressed_ = false;
  std::vector<std::set<const image::PageRun*>> checked_;  // per checker: a run may feed several
  std::optional<BatchVerifier> verifier_;
  uint64_t total_ = 0;
  ProgressFn progress_;
  std::atomic<bool> failed_{false};  // one writer's failure ends the other's part
};

}  // namespace ckpt::restore
