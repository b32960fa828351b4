// The memory behind a capture's buffers, kept from one capture to the next
// in the same process. Fresh memory is what a copy costs most on a VM: this
// one hands freed pages back to its host, and the first touch of each page
// then costs a fault in the host as well (docs/performance.md). A process that
// checkpoints again and again (the C API in a launcher, a live checkpoint's
// rounds) keeps what it used: marked MADV_FREE while
// idle, so the kernel may still take it back under memory pressure (the next
// touch then faults in a zeroed page, as fresh memory would).
#pragma once

#include <cstdint>

namespace ckpt::dump {

struct Arena {
  void* base = nullptr;      // the mapping: `bytes` and one batch for alignment
  uint8_t* start = nullptr;  // batch-aligned
  uint64_t bytes = 0;
  uint64_t touched = 0;  // bytes from `start` written by an earlier capture
};

// An arena of at least `bytes`: the smallest kept one that is large enough,
// or a new reservation (address space only; large ones rounded up to whole
// GiB so that a budget that moves with MemAvailable still finds it).
// `start` is null when the address space cannot be reserved.
Arena take_arena(uint64_t bytes);

// Back for the next capture; `touched` is how much of it was written. Kept
// if `keep` (CaptureTuning::keep_buffers), unless under strict overcommit
// (the reservation would be charged); a few at most (a checkpoint and its
// live rounds use two at once). Never in a child after fork (MADV_DONTFORK), nor
// in a core dump (MADV_DONTDUMP): it holds copies of other processes' memory.
void return_arena(Arena a, bool keep);

// Unmaps every kept arena (ckpt::release_buffers()).
void release_arenas();

}  // namespace ckpt::dump
