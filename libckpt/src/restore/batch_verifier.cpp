#include "restore/batch_verifier.hpp"

#include <algorithm>

namespace ckpt::restore {

BatchVerifier::BatchVerifier(size_t batches, unsigned threads, size_t ahead, CheckFn check)
    : check_(std::move(check)),
      threads_(threads ? threads : 1),
      ahead_(ahead ? ahead : 1),
      good_(batches, 0) {
  for (unsigned t = 0; t < threads_; ++t) workers_.emplace_back([this, t] { work(t); });
}

BatchVerifier::~BatchVerifier() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void BatchVerifier::work(unsigned t) {
  for (size_t b = t; b < good_.size(); b += threads_) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || b < written_ + ahead_; });
      if (stop_) return;
    }
    Status st = check_(b, t);
    std::lock_guard<std::mutex> l(mu_);
    if (st.ok()) {
      good_[b] = 1;
    } else {
      if (failure_.ok()) failure_ = st;
      stop_ = true;
    }
    cv_.notify_all();
    if (stop_) return;
  }
}

Status BatchVerifier::wait(size_t b) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return good_[b] || stop_; });
  if (good_[b]) return {};
  return failure_.ok() ? make_error(EIO, "content verification stopped") : failure_;
}

void BatchVerifier::written(size_t b) {
  {
    std::lock_guard<std::mutex> l(mu_);
    written_ = std::max(written_, b + 1);  // two writers finish out of order
  }
  cv_.notify_all();
}

}  // namespace ckpt::restore
