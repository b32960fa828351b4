#include "dump/arena.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "dump/memory.hpp"
#include "util/fd.hpp"

namespace ckpt::dump {
namespace {

constexpr size_t kKept = 3;
constexpr uint64_t kGiB = 1ull << 30;

std::mutex pool_mutex;
std::vector<Arena> pool;
pid_t pool_owner = 0;  // a forked child inherits the list but not the mappings

// Under strict overcommit (vm.overcommit_memory=2) MAP_NORESERVE is
// ignored: a kept reservation of half the memory would count against the
// system's commit limit between checkpoints, and others' allocations could
// fail. Kept only where address space costs nothing until touched.
bool keep_allowed() {
  auto mode = read_file("/proc/sys/vm/overcommit_memory");
  return !mode.ok() || std::atoi(mode->c_str()) != 2;
}

void unmap(const Arena& a) {
  ::munmap(a.base, a.bytes + kBatchBytes);
}

// Under pool_mutex: forget what a parent process kept (MADV_DONTFORK left
// none of it mapped here).
void adopt_locked() {
  if (pool_owner == ::getpid()) return;
  pool.clear();
  pool_owner = ::getpid();
}

}  // namespace

Arena take_arena(uint64_t bytes) {
  {
    std::lock_guard<std::mutex> l(pool_mutex);
    adopt_locked();
    size_t best = pool.size();
    for (size_t i = 0; i < pool.size(); i++)
      if (pool[i].bytes >= bytes && (best == pool.size() || pool[i].bytes < pool[best].bytes))
        best = i;
    if (best != pool.size()) {
      Arena a = pool[best];
      pool.erase(pool.begin() + long(best));
      return a;
    }
  }
  Arena a;
  a.bytes = bytes > 256 * (1ull << 20) ? (bytes + kGiB - 1) / kGiB * kGiB : bytes;
  void* p = ::mmap(nullptr, a.bytes + kBatchBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return {};
  a.base = p;
  a.start = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + kBatchBytes - 1) &
                                       ~uintptr_t(kBatchBytes - 1));
  // Huge pages: one fault per 2 MiB buffer instead of 512.
  ::madvise(a.start, a.bytes, MADV_HUGEPAGE);
  ::madvise(p, a.bytes + kBatchBytes, MADV_DONTFORK);
  ::madvise(p, a.bytes + kBatchBytes, MADV_DONTDUMP);
  return a;
}

void return_arena(Arena a, bool keep) {
  if (!a.base) return;
  if (!keep || !keep_allowed()) return unmap(a);
  // Idle memory the kernel may reclaim; if it does not, the next capture
  // writes into it without a fault. Without MADV_FREE (before 4.5) it is
  // given back: kept, it could never be reclaimed.
  if (a.touched && ::madvise(a.start, a.touched, MADV_FREE) != 0) {
    ::madvise(a.start, a.touched, MADV_DONTNEED);
    a.touched = 0;
  }
  std::lock_guard<std::mutex> l(pool_mutex);
  adopt_locked();
  pool.push_back(a);
  if (pool.size() > kKept) {
    // The smallest goes: the large ones are what is costly to fault in.
    size_t small = 0;
    for (size_t i = 1; i < pool.size(); i++)
      if (pool[i].bytes < pool[small].bytes) small = i;
    unmap(pool[small]);
    pool.erase(pool.begin() + long(small));
  }
}

void release_arenas() {
  std::lock_guard<std::mutex> l(pool_mutex);
  adopt_locked();
  for (const Arena& a : pool) unmap(a);
  pool.clear();
}

}  // namespace ckpt::dump
