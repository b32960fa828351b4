// Checks the content a restore writes, ahead of the writer: batch b may be
// copied into the new process only once every run it reads has matched its
// checksum. Compressed runs are decoded as they are checked, which is
// slower than the copy, so several threads take turns (batch b goes to
// thread b % threads). Plain runs are checked by the writers themselves,
// just before each copy (content_writer.cpp).
// They stay at most `ahead` batches in front of the writer, so decoded
// content waiting to be copied stays bounded.
#pragma once

#include <ckpt/result.hpp>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ckpt::restore {

class BatchVerifier {
 public:
  // check(b, t): verifies batch b on worker t (0 <= t < threads); called
  // for each batch once, from one worker, concurrently for different b.
  using CheckFn = std::function<Status(size_t batch, unsigned worker)>;

  BatchVerifier(size_t batches, unsigned threads, size_t ahead, CheckFn check);
  ~BatchVerifier();  // stops the workers and waits for them
  BatchVerifier(const BatchVerifier&) = delete;
  BatchVerifier& operator=(const BatchVerifier&) = delete;

  // Waits until batch b is verified; the first failure otherwise.
  Status wait(size_t b);
  // A writer is done with batch b (and, with one writer, every batch
  // before it): the workers may go further.
  void written(size_t b);

 private:
  void work(unsigned t);

  CheckFn check_;
  const unsigned threads_;
  const size_t ahead_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char> good_;
  size_t written_ = 0;  // batches [0, written_) are copied
  bool stop_ = false;
  Status failure_;
  std::vector<std::thread> workers_;
};

}  // namespace ckpt::restore
