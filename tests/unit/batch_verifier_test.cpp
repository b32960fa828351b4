// BatchVerifier with two writers (restore/address_space: plain chains are
// written by two threads, even and odd batches): batches finish out of
// order, and the window of batches checked ahead must never shrink, or
// both writers can wait for a check that waits for them.
#include "restore/batch_verifier.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

namespace ckpt::restore {
namespace {

TEST(BatchVerifier, TwoWritersFinishingOutOfOrderNeverStall) {
  constexpr size_t kBatches = 40;
  std::vector<std::atomic<int>> checks(kBatches);
  std::atomic<size_t> odd_done{0};  // batches [0, odd_done) of the odd writer are written
  std::atomic<bool> failed{false};
  // A stall is a hang: the alarm ends the test instead (and fails it).
  ::alarm(60);
  {
    BatchVerifier v(kBatches, 1, 2, [&](size_t b, unsigned) -> Status {
      checks[b]++;
      return {};
    });
    // The even writer reports batch 2k written only after the odd one wrote
    // 2k + 1: the window must stay where 2k + 1 put it, or batch 2k + 3
    // is never checked and the odd writer waits for ever.
    auto writer = [&](size_t first) {
      for (size_t b = first; b < kBatches; b += 2) {
        if (!v.wait(b).ok()) {
          failed = true;
          return;
        }
        if (first == 0 && b + 1 < kBatches)
          while (odd_done.load() < b + 2) std::this_thread::yield();
        v.written(b);
        if (first == 1) odd_done = b + 1;
      }
    };
    std::thread even(writer, 0), odd(writer, 1);
    even.join();
    odd.join();
  }
  ::alarm(0);
  EXPECT_FALSE(failed.load());
  for (size_t b = 0; b < kBatches; ++b) EXPECT_EQ(checks[b].load(), 1) << "batch " << b;
}

}  // namespace
}  // namespace ckpt::restore
