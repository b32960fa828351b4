#include "image/persister.hpp"

#include <unistd.h>

#include <cstdlib>

namespace ckpt::image {

Persister::Persister(int fd, uint64_t step, std::string path)
    : fd_(fd), step_(step), path_(std::move(path)) {
  thread_ = std::thread([this] { run(); });
}

void Persister::written(uint64_t bytes) {
  std::lock_guard<std::mutex> l(m_);
  written_ = bytes;
  cv_.notify_one();
}

void Persister::run() {
  uint64_t persisted = 0;
  std::unique_lock<std::mutex> l(m_);
  for (;;) {
    cv_.wait(l, [&] { return stopping_ || written_ - persisted >= step_; });
    // A step already due is synced even when stopping: what stop() reports
    // then covers everything written before it.
    if (written_ - persisted < step_) return;
    const uint64_t upto = written_;
    l.unlock();
    const bool ok = ::fdatasync(fd_) == 0;
    const int err = errno;
    l.lock();
    if (!ok && error_.ok()) error_ = sys_error("fdatasync " + path_, err);
    persisted = upto;
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

uint64_t Persister::step_from_env() {
  if (const char* e = std::getenv("LIBCKPT_PERSIST_MIB"))
    return std::strtoull(e, nullptr, 10) << 20;
  return 128ull << 20;
}

}  // namespace ckpt::image
