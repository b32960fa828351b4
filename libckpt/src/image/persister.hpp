// Makes a file durable while it is still being written, from a thread of its
// own, so that the writer never waits for the disk:
// - each `chunk` written starts its writeback (sync_file_range WRITE), so the
//   disk works while the rest is produced and the final fsync waits only for
//   the tail (CRIU writes everything, then syncs). The call is asynchronous
//   in name only: it blocks while the device queue is full, which stalled
//   the writer thread when it was made there;
// - each `step` written (0: never) is fdatasync'ed: on a disk with a
//   volatile write cache (a virtual disk that the host caches) writeback
//   alone reaches only that cache, and the final fsync would then wait for
//   the whole file to reach stable storage after the last write.
#pragma once

#include <ckpt/result.hpp>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace ckpt::image {

class Persister {
 public:
  // Starts the thread; `fd` stays owned by the caller and open until stop().
  // Content starts at byte `base` of the file.
  Persister(int fd, uint64_t base, uint64_t chunk, uint64_t step, std::string path);
  ~Persister() { (void)stop(); }
  Persister(const Persister&) = delete;
  Persister& operator=(const Persister&) = delete;

  // The file now holds `bytes` content bytes written by the caller.
  void written(uint64_t bytes);
  // Joins the thread. An error of any fdatasync it made: the kernel reports
  // a writeback error to each open file once, so the caller's own final
  // fsync would not see it again.
  Status stop();

  // The default `step`: how much written content each fdatasync covers.
  static constexpr uint64_t kDefaultStep = uint64_t(128) << 20;

 private:
  void run();
  int fd_;
  uint64_t base_, chunk_, step_;
  std::string path_;
  std::mutex m_;
  std::condition_variable cv_;
  uint64_t written_ = 0;
  bool stopping_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace ckpt::image
