// dump/capture: a stopped process's pages copied into the tool's buffers and
// handed to the sink in address order, with one reader or two, including
// scattered ranges and a budget smaller than what is read.
#include "dump/capture.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace ckpt::dump {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kPages = 24 * 512;  // 48 MiB: 24 batches

// The byte a page holds: its address mixed, so a page put at the wrong
// address or out of order shows.
uint8_t pattern(uint64_t vaddr) {
  return uint8_t((vaddr >> 12) * 131 + 7);
}

class CaptureTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    child_ = ::fork();
    if (child_ == 0) {
      auto* m = static_cast<uint8_t*>(::mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE,
                                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      for (uint64_t i = 0; i < kPages; ++i) {
        const uint64_t va = reinterpret_cast<uint64_t>(m) + i * kPage;
        std::memset(m + i * kPage, pattern(va), kPage);
      }
      const uint64_t a = reinterpret_cast<uint64_t>(m);
      (void)!::write(p[1], &a, sizeof a);
      for (;;) ::pause();
    }
    ::close(p[1]);
    ASSERT_EQ(::read(p[0], &base_, sizeof base_), ssize_t(sizeof base_));
    ::close(p[0]);
    ASSERT_EQ(::kill(child_, SIGSTOP), 0);  // a frozen target
  }
  void TearDown() override {
    ::kill(child_, SIGKILL);
    ::waitpid(child_, nullptr, 0);
  }

  // How the writer runs during the read: resumed first (draining as the
  // reader goes), not resumed with every buffer faulted in first (it must
  // stay idle until finish(): a frozen target's copy needs nothing from it
  // then), or held (CaptureTuning::Writer::hold: it drains only when every
  // buffer is taken).
  enum class Writer { draining, prefaulted, held };

  // Captures `ranges` with `budget` bytes of buffers; every page arrives
  // once, in ascending order, with its content.
  void capture_and_check(const std::vector<mem::Range>& ranges, uint64_t budget,
                         Writer writer = Writer::draining) {
    const bool prefaulted = writer == Writer::prefaulted;
    CaptureTuning tuning;
    tuning.readers = unsigned(std::atoi(GetParam()));
    if (writer == Writer::held) tuning.writer = CaptureTuning::Writer::hold;
    MemoryPlan plan;
    plan.ranges = ranges;
    std::vector<uint64_t> got;
    bool content_ok = true;
    std::atomic<size_t> sunk{0};
    Capture c(budget, tuning);
    if (prefaulted) c.prefault(budget);
    if (writer == Writer::draining) c.resume();
    Status st = c.read(child_, plan,
                       [&](uint64_t va, const uint8_t* d, size_t n) {
                         ++sunk;
                         for (size_t i = 0; i < n; ++i) {
                           const uint64_t a = va + i * kPage;
                           got.push_back(a);
                           for (uint64_t o = 0; o < kPage; o += 512)
                             content_ok &= d[i * kPage + o] == pattern(a);
                         }
                         return Status{};
                       },
                       {});
    ASSERT_TRUE(st.ok()) << st.error().message;
    if (prefaulted) {
      EXPECT_EQ(sunk.load(), 0u) << "the writer drained while the target was frozen";
    }
    ASSERT_TRUE(c.finish().ok());
    std::vector<uint64_t> want;
    for (const mem::Range& r : ranges)
      for (uint64_t a = r.addr; a < r.end(); a += kPage) want.push_back(a);
    EXPECT_TRUE(content_ok) << "a page arrived with another page's content";
    EXPECT_EQ(got, want) << "pages missing, repeated or out of order";
  }

  pid_t child_ = -1;
  uint64_t base_ = 0;
};

TEST_P(CaptureTest, EveryPageOnceInOrder) {
  capture_and_check({{base_, kPages * kPage}}, uint64_t(64) << 20);
}

std::vector<mem::Range> scattered(uint64_t base) {
  std::mt19937 rng(3);
  std::vector<mem::Range> ranges;
  for (uint64_t i = 0; i < kPages;) {
    const uint64_t len = 1 + rng() % 300, gap = rng() % 40;
    if (i + len > kPages) break;
    ranges.push_back({base + i * kPage, len * kPage});
    i += len + gap + 1;
  }
  return ranges;
}

TEST_P(CaptureTest, ScatteredRangesAndASmallBudget) {
  capture_and_check(scattered(base_), 4 * kBatchBytes);  // the reader waits for the writer
}

// A held writer drains once every buffer is taken, also when the second
// reader's buffer is the last one (it once waited for a wake-up that never came).
TEST_P(CaptureTest, HeldWriterAndASmallBudget) {
  capture_and_check(scattered(base_), 4 * kBatchBytes, Writer::held);
}

TEST_P(CaptureTest, PrefaultedBuffersHoldTheWriterUntilTheRelease) {
  capture_and_check({{base_, kPages * kPage}}, kPages * kPage + 4 * kBatchBytes,
                    Writer::prefaulted);
}

INSTANTIATE_TEST_SUITE_P(Readers, CaptureTest, ::testing::Values("1", "2"), [](const auto& info) {
  return std::string(info.param) == "1" ? "OneReader" : "TwoReaders";
});

}  // namespace
}  // namespace ckpt::dump
