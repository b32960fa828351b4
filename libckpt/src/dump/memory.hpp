// Chooses the pages worth saving and streams them from the target into the
// page file: one thread reads (process_vm_readv) while the caller's thread
// hashes and writes, so reading and writing overlap.
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <functional>
#include <vector>

#include "image/model.hpp"
#include "image/writer.hpp"
#include "mem/range.hpp"

namespace ckpt::dump {

struct MemoryPlan {
  std::vector<mem::Range> ranges;  // pages to read, ascending
  uint64_t pages_scanned = 0;
  uint64_t bytes() const;
};

// Selects populated anonymous pages and COW copies of private file pages.
Result<MemoryPlan> plan_memory(pid_t pid, const std::vector<image::VmaRecord>& vmas);

// Receives the pages read, in ascending address order.
using PageSink = std::function<Status(uint64_t vaddr, const uint8_t* data, size_t npages)>;

// For a tracked incremental: of `dirty` (sorted, merged), the pages worth
// saving; dirty pages that hold nothing any more (zapped, or no longer a
// private copy of their file page) become `complete` ranges, restored as
// freshly mapped.
Result<MemoryPlan> plan_dirty_memory(pid_t pid, const std::vector<image::VmaRecord>& vmas,
                                     const std::vector<mem::Range>& dirty,
                                     std::vector<image::MemRange>* complete);

// Reads happen in batches of 2 MiB (a core's L2 here) and at most 1024
// ranges (the remote iovec limit).
constexpr uint64_t kBatchBytes = 2 << 20;
struct Batch {
  std::vector<mem::Range> ranges;
  uint64_t bytes = 0;
};
std::vector<Batch> make_batches(const std::vector<mem::Range>& ranges);

// Reads the planned ranges and hands them to `sink` (on the calling thread).
Status dump_memory(pid_t pid, const MemoryPlan& plan, const PageSink& sink,
                   const ProgressFn& progress);

}  // namespace ckpt::dump
