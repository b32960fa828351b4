// Levels of checkpoints (--local): every checkpoint is written to the
// local level (a node-local disk or tmpfs), and the job is released once
// it is committed there; a flusher per further level then copies each
// committed generation there (the shared level: the job's directory, which
// every node sees; the partner level: another node's agent) in a child
// process, one generation at a time and in order, so that a chain there
// always holds a full and the incrementals on it without a gap. A
// generation appears there only once all of it is stored. A new chain
// supersedes what of an older one is still waiting.
#pragma once

#include <sys/types.h>

#include <deque>
#include <functional>
#include <string>

#include "cr_run/chains.hpp"
#include "cr_run/log.hpp"

namespace cr_run {

// A level a flusher copies to.
struct FlushTarget {
  std::string name;  // "shared", "partner": as the log names the level
  // Run in the flusher's child: copies generation `p` of the local level's
  // chain directory `local_chain` there. Returns an error message, or "".
  std::function<std::string(const std::string& local_chain, Point p, uint64_t* bytes)> copy;
  // After the first generation of a chain was copied: prunes there.
  std::function<void()> after_full;
  // After a generation was copied, with the copy's time.
  std::function<void(double seconds)> copied;
};

class Flusher {
 public:
  Flusher(std::string local, FlushTarget target, Log& log)
      : local_(std::move(local)), target_(std::move(target)), log_(log) {}
  Flusher(const Flusher&) = delete;
  Flusher& operator=(const Flusher&) = delete;
  ~Flusher();
  // A generation was committed on the local level.
  void committed(Point p);
  // The loop reaped `pid`: true if it was this flusher's copy (then handled).
  bool reaped(pid_t pid, int status);
  // Starts the next copy if none runs; call from the loop.
  void pump();
  // Seconds until a failed copy is tried again (-1: nothing waits on time).
  double retry_in() const;
  // Waits for the copies still pending (the job ended or stopped).
  void drain();
  // Ends the copy running and forgets those waiting (the job finished).
  void cancel();
  // The copy running (0: none): a child of the loop that is not the job's.
  pid_t child() const { return child_; }

 private:
  void start(Point p);

  std::string local_;
  FlushTarget target_;
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
