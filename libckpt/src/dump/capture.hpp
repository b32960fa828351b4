// Copies frozen processes' memory into buffers the tool owns, so a job can
// run again as soon as its pages are copied: a background thread drains the
// buffers into each member's page sink (the page cache, the disk) meanwhile
// and after the release. The buffers are bounded: when the budget is used up
// the reader waits for the writer, and the freeze then lasts as long as the
// disk needs for the excess (docs/performance.md, "A freeze that does not
// depend on the disk").
#pragma once

#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "dump/arena.hpp"
#include "dump/memory.hpp"

namespace ckpt::dump {

// The default budget: half of MemAvailable, at least the 8 MiB a streaming
// copy uses anyway.
uint64_t default_capture_budget();

// How much buffer memory to fault in before the freeze of `pid`, while it
// still runs: a quarter more than `expected` plus 16 MiB (16 MiB when it is
// 0, unknown), capped by the process's resident size; 64 MiB for kFullCopy
// (a full, a hash-tracker generation). For an incremental, `expected` is
// what the parent incremental copied (its non-zero runs uncompressed) or
// what the tracker finds written just before the freeze
// (dirty::Tracker::written_estimate), the larger. The first touch of fresh
// memory is what the copy costs most on a VM, and buffers faulted in for
// the whole copy also let it run with the writer held and two readers
// (Capture::read). A full is not worth it: faulting in the whole process
// shortens its freeze a little but lengthens the checkpoint several times
// (docs/performance.md); a full's buffers are recycled by the writer as the
// copy goes.
constexpr uint64_t kFullCopy = ~uint64_t(0);
uint64_t capture_prefault_bytes(pid_t pid, uint64_t expected);

class Capture {
 public:
  explicit Capture(uint64_t budget_bytes, const CaptureTuning& tuning = {});
  ~Capture();  // abandons what is queued and joins the writer
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // On the calling thread (the tracer, which must release the target):
  // reads `plan` of `pid` batch by batch into buffers and queues them for
  // `sink`, which runs on the writer thread and must stay valid until
  // finish(). `progress` runs on the writer thread too. With `missed`
  // (a target that runs meanwhile: a live checkpoint's pre-copy), ranges
  // that cannot be read are listed there instead of failing the read.
  Status read(pid_t pid, const MemoryPlan& plan, PageSink sink, ProgressFn progress,
              uint64_t progress_base = 0, uint64_t progress_total = 0,
              std::vector<mem::Range>* missed = nullptr);
  // While held (from construction until resume()), the writer thread stays
  // idle unless the budget is used up: a frozen target gets the CPU for its
  // copy rather than sharing it with the disk write. Held by default when no
  // second CPU is free (one CPU allowed, or the load average at least the
  // CPU count), and for a frozen read whose buffers are all faulted in
  // already (the writer would free none that the copy needs);
  // CaptureTuning::writer forces either (docs/performance.md measures both).
  void resume();
  // Allocates the first `bytes` of buffer memory now (capped at the budget),
  // before the job is frozen: the first touch of fresh memory is what the
  // copy costs most on a VM (docs/performance.md), and the buffers an
  // incremental needs would otherwise be faulted in while the job waits.
  void prefault(uint64_t bytes);
  // Waits until every queued batch went through its sink: the first error.
  Status finish();
  // Progress is reported on the thread that made this Capture (the API's
  // caller: ckpt.h promises its callback runs there), not on the writer's:
  // read() and finish() do it when called there, and a caller whose read()
  // runs on another thread calls report() while it waits.
  void report();
  // The largest amount of buffer memory in use at once.
  uint64_t peak_bytes() const { return peak_; }

 private:
  struct Item {
    int buf;
    std::vector<mem::Range> ranges;
    uint64_t bytes;
    const PageSink* sink;
    const ProgressFn* progress;
    uint64_t progress_done, progress_total;
  };
  int take_buffer();  // blocks while the budget is used up
  // Whether `batches` buffers can be taken without faulting in new memory.
  bool fits_touched(size_t batches);
  void give_back(int buf);
  void enqueue(Item item);
  void drain();

  uint64_t slots_ = 0;
  Arena arena_;  // the buffers' memory: slots_ batches from arena_.start
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<int> free_;
  int next_unused_ = 0;
  std::deque<Item> queue_;
  std::deque<PageSink> sinks_;  // stable addresses for queued items
  std::deque<ProgressFn> progresses_;
  // The newest batch written: its progress, not reported yet.
  const ProgressFn* progress_fn_ = nullptr;
  uint64_t progress_done_ = 0, progress_total_ = 0;
  bool progress_new_ = false;
  std::thread::id owner_ = std::this_thread::get_id();
  bool closing_ = false, abandon_ = false, held_ = true, hold_forced_ = false, resumed_ = false;
  unsigned cpus_ = 1;
  CaptureTuning tuning_;
  uint64_t touched_slots_ = 0;  // buffers faulted in by prefault()
  Status error_;
  uint64_t in_use_ = 0, peak_ = 0;
  std::thread writer_;
};

}  // namespace ckpt::dump
