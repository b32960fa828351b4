// Transparent huge pages under the pagemap-scan tracker.
//
// Write-protecting a PMD-mapped huge page whole keeps it huge, but the
// program's first write to it then splits it into 512 small mappings: with
// asynchronous write-protect the kernel resolves that fault at 4 KiB (probe
// and numbers: docs/performance.md, "Huge pages under pagemap-scan
// tracking"). A program that
// asked for huge pages (MADV_HUGEPAGE) lost them after its first checkpoint
// or restore, and ran up to 4x slower until khugepaged (which refuses
// protected entries) could not give them back.
//
// So the tracker never protects a PMD-mapped huge page by default: its
// ordinary scans skip pages in PAGE_IS_HUGE. Such a page always reads as
// written and is saved whole by every checkpoint, which is what keeps this
// exact: no write to it can go unseen, whatever happens to it later (split
// by mprotect/munmap/MADV_DONTNEED of a part: its small entries inherit "not
// protected" and read as written; collapsed again from small pages:
// khugepaged and MADV_COLLAPSE refuse protected entries, and the new PMD is
// not protected).
//
// Saving a huge page that the program no longer writes is wasted work, so
// each collect hashes every unprotected huge block (2 MiB, xxh3 of its
// content) and compares with the hash the previous collect recorded. A block
// whose content did not change over the last interval is protected whole
// (PMD-level, no split) and is tracked exactly from then on; if the program
// writes it again, that write splits it, as before this file existed, but
// only for blocks that had gone quiet. The hash only chooses what to
// protect; it never drops a written page from the dirty set (the bytes
// hashed are not the bytes the checkpoint saves: a write by the kernel on
// the target's behalf may fall between the two reads).
//
// A program may rewrite a block with the same content every interval (a
// solver recomputing an array from unchanged inputs): the hash calls it
// quiet, it is protected, and the next write splits it. The next collect
// finds such a block no longer huge and written: it is unprotected again
// (UFFDIO_WRITEPROTECT off: its pages then read as written, so nothing is
// lost), collapsed back into a huge page (process_madvise MADV_COLLAPSE, best
// effort) and marked as one that the hash must not judge any more: it stays
// unprotected and saved whole from then on.
//
// The hashes are kept next to the tracking ledger, tagged with the
// generation that recorded them; those of another parent are ignored (then
// nothing is protected this time, only hashes recorded).
// LIBCKPT_KEEP_HUGE_PAGES=off protects huge pages like any other page (the
// behaviour before, for comparison).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "dirty/tracker.hpp"
#include "mem/range.hpp"

namespace ckpt::dirty {

constexpr uint64_t kHugeBlock = 2ull << 20;

struct HugeOptions {
  bool keep_huge = true;  // leave PMD-mapped huge pages unprotected unless quiet
};

// Reads [addr, addr + kHugeBlock) of the target into `buf`; false on failure.
using ReadBlockFn = std::function<bool(uint64_t addr, uint8_t* buf)>;

class HugeBlocks {
 public:
  explicit HugeBlocks(HugeOptions o) : opts_(o) {}

  bool enabled() const { return opts_.keep_huge; }
  // The hashes the parent generation's collect recorded for this process
  // and chain; none when they belong to another generation or chain.
  void load(pid_t pid, const TrackerState& s);
  // Records this collect's hashes for the generation in `s` (best effort).
  void save(pid_t pid, const TrackerState& s) const;

  // One VMA piece, `piece`: `unprotected` its PMD-mapped huge pages that are
  // not protected, `mapped` all its PMD-mapped huge pages, `written` what
  // this collect found written in it. Hashes each unprotected block and
  // appends to `quiet` the blocks whose content equals the previous
  // collect's (to be protected: never one marked as rewriting; a block that
  // cannot be read is not quiet). Appends to `repair` the blocks protected
  // as quiet last time that are no longer huge and were written (to be
  // unprotected and collapsed); they are marked as rewriting.
  void examine(mem::Range piece, const std::vector<mem::Range>& unprotected,
               const std::vector<mem::Range>& mapped, const std::vector<mem::Range>& written,
               const ReadBlockFn& read, std::vector<mem::Range>* quiet,
               std::vector<mem::Range>* repair);

  // Statistics of the last collect: huge bytes left unprotected (saved
  // whole), huge bytes protected because they were quiet.
  uint64_t kept_bytes() const { return kept_bytes_; }
  uint64_t quiet_bytes() const { return quiet_bytes_; }
  uint64_t repaired_bytes() const { return repaired_bytes_; }

  struct Block {
    uint64_t hash = 0;     // xxh3 of its 2 MiB at the last collect
    bool quiet = false;    // protected whole by the last collect
    bool rewrite = false;  // written with unchanged content: never judged quiet
  };

 private:
  HugeOptions opts_;
  std::map<uint64_t, Block> prev_, next_;  // by the block's address
  uint64_t kept_bytes_ = 0, quiet_bytes_ = 0, repaired_bytes_ = 0;
};

}  // namespace ckpt::dirty
