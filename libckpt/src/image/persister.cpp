#include "image/persister.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace ckpt::image {

Persister::Persister(int fd, uint64_t base, uint64_t chunk, uint64_t step, std::string path)
    : fd_(fd), base_(base), chunk_(chunk), step_(step), path_(std::move(path)) {
  thread_ = std::thread([this] { run(); });
}

void Persister::written(uint64_t bytes) {
  std::lock_guard<std::mutex> l(m_);
  written_ = bytes;
  cv_.notify_one();
}

void Persister::run() {
  uint64_t started = 0, persisted = 0;
  std::unique_lock<std::mutex> l(m_);
  // Content dropped from the file (a live checkpoint's pre-copied pages)
  // may bring `written_` below what was started or persisted.
  auto ahead = [&](uint64_t from) { return written_ > from ? written_ - from : 0; };
  auto step_due = [&] { return step_ && ahead(persisted) >= step_; };
  for (;;) {
    cv_.wait(l, [&] { return stopping_ || ahead(started) >= chunk_ || step_due(); });
    // A step already due is synced even when stopping: what stop() reports
    // then covers everything written before it. The rest is the caller's
    // final fsync.
    if (stopping_ && !step_due()) return;
    const uint64_t upto = written_;
    const bool sync = step_due();
    l.unlock();
    if (upto > started)
      ::sync_file_range(fd_, off_t(base_ + started), off_t(upto - started), SYNC_FILE_RANGE_WRITE);
    const bool ok = !sync || ::fdatasync(fd_) == 0;
    const int err = errno;
    l.lock();
    started = std::max(started, upto);
    if (!ok && error_.ok()) error_ = sys_error("fdatasync " + path_, err);
    if (sync) persisted = std::max(persisted, upto);
  }
}

Status Persister::stop() {
  {
    std::lock_guard<std::mutex> l(m_);
    if (stopping_) return error_;
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  return error_;
}

}  // namespace ckpt::image
