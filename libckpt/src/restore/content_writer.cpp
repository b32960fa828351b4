#include "restore/content_writer.hpp"

#include <sys/mman.h>
#include <sys/uio.h>

#include <algorithm>
#include <thread>

#include "restore/uffd_fill.hpp"
#include "util/zeros.hpp"

namespace ckpt::restore {

using image::kPageSize;

// Anonymous memory without huge pages is filled by UFFDIO_COPY (no zeroing first).
class ContentWriter::Fill : public UffdFill {
 public:
  using UffdFill::UffdFill;
};

ContentWriter::ContentWriter(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan,
                             proc::RemoteSyscall& rs)
    : pid_(pid), chain_(chain), vmas_(chain.newest().vmas), slices_(plan.slices), rs_(rs) {}

// Batches of plan slices: one iovec pair per slice, at most 1024 (the
// iovec limit) and about 16 MiB per process_vm_writev.
void ContentWriter::make_batches() {
  constexpr uint64_t kBatchBytes = 16 << 20;
  uint64_t bytes = 0;
  for (size_t i = 0; i < slices_.size(); ++i) {
    if (batches_.empty() || i - batches_.back().first == 1024 || bytes >= kBatchBytes) {
      batches_.push_back({i, i});
      bytes = 0;
    }
    batches_.back().last = i + 1;
    bytes += uint64_t(slices_[i].npages) * kPageSize;
  }
}

const uint8_t* ContentWriter::content(const image::PlanSlice& sl) const {
  return chain_.links[sl.link]->content(*sl.run) + uint64_t(sl.first_page) * kPageSize;
}

void ContentWriter::prepare(size_t b) const {
  if (b + 1 < batches_.size())
    for (size_t i = batches_[b + 1].first; i < batches_[b + 1].last; ++i)
      if (!slices_[i].zero() && !slices_[i].run->compressed())  // a frame: read when verified
        ::madvise(const_cast<uint8_t*>(content(slices_[i])),
                  uint64_t(slices_[i].npages) * kPageSize, MADV_WILLNEED);
  for (size_t i = batches_[b].first; i < batches_[b].last; ++i)
    if (!slices_[i].zero() && !slices_[i].run->compressed())
      ::madvise(const_cast<uint8_t*>(content(slices_[i])), uint64_t(slices_[i].npages) * kPageSize,
                MADV_POPULATE_READ);  // EINVAL before Linux 5.14: the faults as before
}

Status ContentWriter::check_batch(size_t b, unsigned worker) {
  prepare(b);
  for (size_t i = batches_[b].first; i < batches_[b].last; ++i)
    if (checked_[worker].insert(slices_[i].run).second)
      CKPT_TRY(chain_.links[slices_[i].link]->verify_run(*slices_[i].run));
  return {};
}

Status ContentWriter::write(const ProgressFn& progress, MemoryStats* stats) {
  progress_ = progress;
  make_batches();
  for (size_t b = 0; b < batches_.size(); ++b)
    for (size_t i = batches_[b].first; i < batches_[b].last; ++i)
      if (!slices_[i].zero() && slices_[i].run->compressed()) last_use_[slices_[i].run] = b;
  for (const image::PlanSlice& sl : slices_) {
    compressed_ = compressed_ || (!sl.zero() && sl.run->compressed());
    if (!sl.zero()) total_ += uint64_t(sl.npages) * kPageSize;
  }
  // Compressed runs are decoded while they are checked, batches ahead, by
  // more workers. Plain content is checked by the writer itself just before
  // it copies the run (fused): the run (at most 1 MiB) is still in the
  // CPU's cache for the copy, which a checker running ahead left to memory.
  if (compressed_) {
    const unsigned workers = std::max(2u, std::min(4u, std::thread::hardware_concurrency()));
    checked_.resize(workers);
    verifier_.emplace(batches_.size(), workers, 4,
                      [this](size_t b, unsigned t) { return check_batch(b, t); });
  }
  const Fill fill(
      pid_, [&](long nr, uint64_t a1) { return rs_.call(nr, a1); },
      UffdFill::eligible(vmas_, UffdFill::thp_mode()));
  // A second writer takes every other batch when there is a CPU for it and
  // no compressed content (whose decoded copy is freed after its last batch,
  // which a writer running behind could still be reading): faulting in the
  // new process's memory is most of a restore on a VM (clearing fresh pages).
  const bool two =
      last_use_.empty() && batches_.size() > 1 && std::thread::hardware_concurrency() >= 2;
  Part parts[2];
  if (two) {
    std::thread second([&] { write_part(1, 2, &parts[1], false, fill); });
    write_part(0, 2, &parts[0], true, fill);
    second.join();
  } else {
    write_part(0, 1, &parts[0], true, fill);
  }
  for (const Part& p : parts) {
    stats->pages_zero += p.counts.pages_zero;
    stats->bytes_read += p.counts.bytes_read;
    stats->pages_written += p.counts.pages_written;
  }
  verifier_.reset();  // its workers stop before the content they read goes
  if (progress_ && parts[0].st.ok() && parts[1].st.ok()) progress_(total_, total_);
  return parts[0].st.ok() ? parts[1].st : parts[0].st;
}

void ContentWriter::write_part(size_t first, size_t step, Part* part, bool report,
                               const Fill& fill) {
  size_t vma = 0;
  for (size_t b = first; b < batches_.size() && !failed_; b += step) {
    if (!compressed_) prepare(b);
    Status st = verifier_ ? verifier_->wait(b) : Status{};
    if (st.ok()) st = write_batch(b, part, fill, &vma);
    if (!st.ok()) {
      part->st = st;
      failed_ = true;
      if (verifier_) verifier_->written(b);  // the window moves on for a writer waiting on a check
      return;
    }
    if (report && progress_) progress_(std::min(total_, part->done * step), total_);  // about
    drop_done(b);
    if (verifier_) verifier_->written(b);
  }
}

// Zero slices need writing only over file pages (anonymous memory starts
// zeroed).
Status ContentWriter::write_batch(size_t b, Part* part, const Fill& fill, size_t* vma) {
  std::vector<iovec> local, remote;
  ssize_t want = 0;
  for (size_t i = batches_[b].first; i < batches_[b].last; ++i) {
    const image::PlanSlice& sl = slices_[i];
    const uint64_t len = uint64_t(sl.npages) * kPageSize;
    while (vmas_[*vma].end <= sl.vaddr) ++*vma;
    const uint8_t* src;
    if (sl.zero()) {
      part->counts.pages_zero += sl.npages;
      if (!vmas_[*vma].is_file()) continue;
      src = zero_bytes();
    } else {
      src = content(sl);
      part->counts.bytes_read += len;
      part->done += len;
      if (!compressed_ && part->runs.insert(sl.run).second)
        CKPT_TRY(chain_.links[sl.link]->verify_run(*sl.run));
    }
    part->counts.pages_written += sl.npages;
    if (!sl.zero() && fill.covers(sl.vaddr, len)) {
      CKPT_TRY(fill.copy(sl.vaddr, src, len));
      continue;
    }
    local.push_back(iovec{const_cast<uint8_t*>(src), len});
    remote.push_back(iovec{reinterpret_cast<void*>(sl.vaddr), len});
    want += ssize_t(len);
  }
  if (local.empty()) return {};
  ssize_t n =
      ::process_vm_writev(pid_, local.data(), local.size(), remote.data(), remote.size(), 0);
  if (n != want)
    return n < 0 ? sys_error("writing memory into the new process")
                 : make_error(EFAULT, "short write into the new process");
  return {};
}

void ContentWriter::drop_done(size_t b) {
  if (last_use_.empty()) return;
  for (size_t i = batches_[b].first; i < batches_[b].last; ++i) {
    auto it = last_use_.find(slices_[i].run);
    if (it != last_use_.end() && it->second == b)
      chain_.links[slices_[i].link]->drop_content(*slices_[i].run);
  }
}

}  // namespace ckpt::restore
