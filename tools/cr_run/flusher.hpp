// Two levels of checkpoints (--local): every checkpoint is written to the
// local level (a node-local disk or tmpfs), and the job is released once
// it is committed there; the flusher then copies each committed generation
// to the shared level (the job's directory, which every node sees) in a
// child process, one generation at a time and in order, so that a chain
// there always holds a full and the incrementals on it without a gap. A
// generation appears there only once all of it is on disk (copied under a
// hidden name, synced, renamed). A new chain supersedes what of an older
// one is still waiting.
#pragma once

#include <sys/types.h>

#include <deque>
#include <string>

#include "cr_run/chains.hpp"
#include "cr_run/log.hpp"

namespace cr_run {

class Flusher {
 public:
  // `rate` in bytes per second (0: as fast as the storage goes).
  Flusher(std::string local, std::string shared, double rate, uint64_t keep, Log& log)
      : local_(std::move(local)), shared_(std::move(shared)), rate_(rate), keep_(keep), log_(log) {}
  ~Flusher();
  // A generation was committed on the local level.
  void committed(Point p);
  // The loop reaped `pid`: true if it was the flusher's copy (then handled).
  bool reaped(pid_t pid, int status);
  // Starts the next copy if none runs; call from the loop.
  void pump();
  // Seconds until a failed copy is tried again (-1: nothing waits on time).
  double retry_in() const;
  // Waits for the copies still pending (the job ended or stopped).
  void drain();

 private:
  void start(Point p);

  std::string local_, shared_;
  double rate_;
  uint64_t keep_;
  Log& log_;
  std::deque<Point> pending_;
  pid_t child_ = 0;
  int report_fd_ = -1;
  Point copying_;
  double started_ = 0, retry_at_ = 0;
};

// Copies generation directory `from` to `chain_dir`/gen-NNNNNN (the same
// name), under a hidden name first, synced, then renamed. `rate`: bytes per
// second, 0 unlimited. Returns an error message, or "".
std::string copy_generation(const std::string& from, const std::string& chain_dir, double rate,
                            uint64_t* bytes);

}  // namespace cr_run
