#include "dump/capture.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mem/madvise.hpp"
#include "mem/reader.hpp"

#include <memory>

namespace ckpt::dump {

uint64_t default_capture_budget() {
  constexpr uint64_t kMin = 4 * kBatchBytes;
  uint64_t avail_kb = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "re")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %lu kB", &avail_kb) == 1) break;
    std::fclose(f);
  }
  return std::max<uint64_t>(kMin, (avail_kb << 10) / 2);
}

uint64_t capture_prefault_bytes(pid_t pid, uint64_t expected) {
  // A quarter more, and 16 MiB: the next dirty set of a program that
  // rewrites its memory is about as large, seldom the same (a copy that fits
  // in faulted-in buffers also holds the writer: read()).
  const uint64_t cap =
      expected == kFullCopy ? (64ull << 20) : expected + expected / 4 + (16ull << 20);
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/statm", int(pid));
  unsigned long size = 0, resident = 0;
  if (FILE* f = std::fopen(path, "r")) {
    if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return std::min<uint64_t>(cap, uint64_t(resident) * 4096);
}

Capture::Capture(uint64_t budget_bytes, const CaptureTuning& tuning) : tuning_(tuning) {
  slots_ = std::max<uint64_t>(2, budget_bytes / kBatchBytes);
  // Address space only: pages are allocated as buffers are first used,
  // unless an earlier capture in this process left them (dump/arena).
  arena_ = take_arena(slots_ * kBatchBytes);
  touched_slots_ = std::min(slots_, arena_.touched / kBatchBytes);
  // The writer drains while the job is frozen when a second CPU is free for
  // it: the copy and the write then overlap (checkpoint wall time ~ the
  // longer of the two instead of their sum), and the freeze still never
  // waits for the disk (the copy waits only when the whole budget is taken).
  // With one CPU, or every CPU busy (load average at least the CPU count),
  // the writer would only take CPU from the copy the target waits for: held.
  cpu_set_t cpus;
  double load = 0;
  cpus_ = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? unsigned(CPU_COUNT(&cpus)) : 1;
  held_ = cpus_ < 2 || ::getloadavg(&load, 1) != 1 || load >= double(cpus_);
  if (tuning_.writer != CaptureTuning::Writer::automatic) {
    held_ = tuning_.writer == CaptureTuning::Writer::hold;
    hold_forced_ = true;
  }
  writer_ = std::thread([this] { drain(); });
}

void Capture::prefault(uint64_t bytes) {
  if (!arena_.start) return;
  bytes = std::min(slots_ * kBatchBytes, (bytes + kBatchBytes - 1) / kBatchBytes * kBatchBytes);
  if (bytes == 0) return;
  if (::madvise(arena_.start, bytes, MADV_POPULATE_WRITE) != 0)
    for (uint64_t at = 0; at < bytes; at += 4096)  // kernels before 5.14
      reinterpret_cast<volatile uint8_t*>(arena_.start)[at] = 0;
  std::lock_guard<std::mutex> l(m_);
  touched_slots_ = std::max(touched_slots_, bytes / kBatchBytes);
}

bool Capture::fits_touched(size_t batches) {
  std::lock_guard<std::mutex> l(m_);
  const uint64_t fresh =
      touched_slots_ > uint64_t(next_unused_) ? touched_slots_ - next_unused_ : 0;
  return free_.size() + fresh >= batches;
}

void Capture::resume() {
  std::lock_guard<std::mutex> l(m_);
  held_ = false;
  resumed_ = true;
  cv_.notify_all();
}

Capture::~Capture() {
  {
    std::lock_guard<std::mutex> l(m_);
    closing_ = abandon_ = true;
    cv_.notify_all();
  }
  writer_.join();
  arena_.touched =
      std::max(arena_.touched, std::max<uint64_t>(touched_slots_, next_unused_) * kBatchBytes);
  return_arena(arena_, tuning_.keep_buffers);
}

int Capture::take_buffer() {
  std::unique_lock<std::mutex> l(m_);
  // A held writer drains only once every buffer is taken: this may be the
  // moment (a second reader can hold a buffer not queued yet).
  if (free_.empty() && uint64_t(next_unused_) >= slots_) cv_.notify_all();
  cv_.wait(l, [&] { return !free_.empty() || uint64_t(next_unused_) < slots_ || !error_.ok(); });
  if (!error_.ok()) return -1;
  int i;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
  } else {
    i = next_unused_++;
  }
  in_use_ += kBatchBytes;
  peak_ = std::max(peak_, in_use_);
  return i;
}

namespace {

// A second thread that reads one batch while the caller reads another: with
// the job frozen and CPUs to spare, it nearly halves the copy
// (process_vm_readv of 512 MiB in 2 MiB calls: 53-56 ms with one reader,
// 28-32 ms with two, here). docs/performance.md has when it pays.
class SecondReader {
 public:
  explicit SecondReader(pid_t pid) : rr_(pid), thread_([this] { run(); }) {}
  ~SecondReader() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void start(const std::vector<mem::Range>* ranges, uint8_t* buf) {
    std::lock_guard<std::mutex> l(m_);
    ranges_ = ranges;
    buf_ = buf;
    busy_ = true;
    cv_.notify_all();
  }
  Status wait() {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return !busy_; });
    return st_;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || busy_; });
      if (stop_) return;
      l.unlock();
      Status st = rr_.read(ranges_->data(), ranges_->size(), buf_);
      l.lock();
      st_ = st;
      busy_ = false;
      cv_.notify_all();
    }
  }
  mem::RemoteReader rr_;
  std::mutex m_;
  std::condition_variable cv_;
  const std::vector<mem::Range>* ranges_ = nullptr;
  uint8_t* buf_ = nullptr;
  bool busy_ = false, stop_ = false;
  Status st_;
  std::thread thread_;
};

// Whether a frozen copy gets a second reader: with the writer held for the
// copy (`writer_idle`), on any two CPUs (the frozen job's CPU is free);
// otherwise only with a CPU free for it besides this thread's and the
// writer's (three CPUs allowed, the load average at most the CPU count minus
// three): on two CPUs the draining writer competes with both readers
// (a 512 MiB freeze lasted longer). CaptureTuning::readers forces either.
bool second_reader_wanted(unsigned readers, unsigned cpus, bool writer_idle) {
  if (readers) return readers >= 2;
  if (writer_idle) return cpus >= 2;
  double load = 0;
  if (::getloadavg(&load, 1) != 1) return false;
  return cpus >= 3 && load <= double(cpus - 3);
}

}  // namespace

void Capture::give_back(int buf) {
  std::lock_guard<std::mutex> l(m_);
  free_.push_back(buf);
  in_use_ -= kBatchBytes;
  cv_.notify_all();
}

void Capture::enqueue(Item item) {
  std::lock_guard<std::mutex> l(m_);
  queue_.push_back(std::move(item));
  cv_.notify_all();
}

Status Capture::read(pid_t pid, const MemoryPlan& plan, PageSink sink, ProgressFn progress,
                     uint64_t progress_base, uint64_t progress_total,
                     std::vector<mem::Range>* missed) {
  if (!arena_.start) return sys_error("reserving capture buffers");
  std::vector<Batch> batches = make_batches(plan.ranges);
  if (batches.empty()) return {};
  const PageSink* s;
  const ProgressFn* pr;
  {
    std::lock_guard<std::mutex> l(m_);
    sinks_.push_back(std::move(sink));
    progresses_.push_back(std::move(progress));
    s = &sinks_.back();
    pr = &progresses_.back();
  }
  if (!progress_total) progress_total = plan.bytes();
  mem::RemoteReader rr(pid);
  uint64_t done = progress_base;
  auto buffer = [&](int i) { return arena_.start + uint64_t(i) * kBatchBytes; };
  // A running target (missed != null: a live pre-copy) keeps one reader: a
  // second would take the CPU from the program, and its misses are handled
  // range by range below.
  // A frozen copy whose buffers are all faulted in already (prefault(), or
  // given back) needs nothing from the writer until the release: it is held
  // and its CPU goes to a second reader (mg-like incrementals of 320 MB:
  // docs/performance.md, "The copy of a program that rewrites its memory").
  bool writer_idle = false;
  if (!missed && !hold_forced_ && fits_touched(batches.size())) {
    std::lock_guard<std::mutex> l(m_);
    if (!resumed_) held_ = writer_idle = true;
  }
  std::unique_ptr<SecondReader> second;
  if (!missed && batches.size() > 1 && second_reader_wanted(tuning_.readers, cpus_, writer_idle))
    second = std::make_unique<SecondReader>(pid);
  for (size_t k = 0; k < batches.size(); k += second ? 2 : 1) {
    report();
    int i = take_buffer();
    if (i < 0) break;  // the writer failed: finish() reports it
    int j = -1;        // the second reader's buffer, for batch k + 1
    if (second && k + 1 < batches.size()) {
      j = take_buffer();
      if (j < 0) {
        give_back(i);
        break;
      }
      second->start(&batches[k + 1].ranges, buffer(j));
    }
    Batch& b = batches[k];
    Status st = rr.read(b.ranges.data(), b.ranges.size(), buffer(i));
    Status st2 = j >= 0 ? second->wait() : Status{};
    if (!st.ok() && missed) {
      // Range by range, keeping what can be read, packed in order.
      std::vector<mem::Range> good;
      uint64_t at = 0;
      for (const mem::Range& r : b.ranges) {
        if (rr.read(&r, 1, buffer(i) + at).ok()) {
          good.push_back(r);
          at += r.len;
        } else {
          missed->push_back(r);
        }
      }
      b.ranges = std::move(good);
      st = {};
    }
    if (!st.ok() || !st2.ok()) {
      give_back(i);
      if (j >= 0) give_back(j);
      return st.ok() ? st2 : st;
    }
    // In address order: the sinks expect ascending pages.
    done += b.bytes;
    enqueue(Item{i, std::move(b.ranges), b.bytes, s, pr, done, progress_total});
    if (j >= 0) {
      Batch& b2 = batches[k + 1];
      done += b2.bytes;
      enqueue(Item{j, std::move(b2.ranges), b2.bytes, s, pr, done, progress_total});
    }
  }
  return {};
}

void Capture::drain() {
  for (;;) {
    Item it;
    bool failed;
    {
      std::unique_lock<std::mutex> l(m_);
      // Held: only when every buffer is taken (the reader would wait anyway).
      cv_.wait(l, [&] {
        return closing_ ||
               (!queue_.empty() && (!held_ || (free_.empty() && uint64_t(next_unused_) >= slots_)));
      });
      if (abandon_ || (queue_.empty() && closing_)) return;
      it = std::move(queue_.front());
      queue_.pop_front();
      failed = !error_.ok();  // after an error the rest is only given back
    }
    Status st;
    const uint8_t* p = arena_.start + uint64_t(it.buf) * kBatchBytes;
    for (const mem::Range& r : it.ranges) {
      if (failed) break;
      st = (*it.sink)(r.addr, p, r.len / image::kPageSize);
      if (!st.ok()) break;
      p += r.len;
    }
    std::lock_guard<std::mutex> l(m_);
    if (st.ok() && !failed && *it.progress) {
      progress_fn_ = it.progress;
      progress_done_ = it.progress_done;
      progress_total_ = it.progress_total;
      progress_new_ = true;
    }
    free_.push_back(it.buf);
    in_use_ -= kBatchBytes;
    if (!st.ok() && error_.ok()) error_ = st;
    cv_.notify_all();
  }
}

Status Capture::finish() {
  resume();
  for (;;) {
    {
      std::unique_lock<std::mutex> l(m_);
      if (cv_.wait_for(l, std::chrono::milliseconds(20),
                       [&] { return queue_.empty() && in_use_ == 0; }))
        break;
    }
    report();
  }
  report();
  std::lock_guard<std::mutex> l(m_);
  return error_;
}

void Capture::report() {
  if (std::this_thread::get_id() != owner_) return;
  const ProgressFn* fn;
  uint64_t done, total;
  {
    std::lock_guard<std::mutex> l(m_);
    if (!progress_new_) return;
    progress_new_ = false;
    fn = progress_fn_;
    done = progress_done_;
    total = progress_total_;
  }
  (*fn)(done, total);
}

}  // namespace ckpt::dump
