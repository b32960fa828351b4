// Makes a file durable while it is still being written: a thread calls
// fdatasync() each time `step` more bytes were written. On a disk with a
// volatile write cache (a virtual disk that the host caches) the final fsync
// otherwise waits for the whole file to reach stable storage after the last
// write; persisting it in steps overlaps that wait with the writing.
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
  Persister(int fd, uint64_t step, std::string path);
  ~Persister() { (void)stop(); }
  Persister(const Persister&) = delete;
  Persister& operator=(const Persister&) = delete;

  // The file now holds `bytes` bytes written by the caller.
  void written(uint64_t bytes);
  // Joins the thread. An error of any fdatasync it made: the kernel reports
  // a writeback error to each open file once, so the caller's own final
  // fsync would not see it again.
  Status stop();

  // From the environment: LIBCKPT_PERSIST_MIB (0: off), else the default.
  static uint64_t step_from_env();

 private:
  void run();
  int fd_;
  uint64_t step_;
  std::string path_;
  std::mutex m_;
  std::condition_variable cv_;
  uint64_t written_ = 0;
  bool stopping_ = false;
  Status error_;
  std::thread thread_;
};

}  // namespace ckpt::image
