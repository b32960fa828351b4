// The sender's witness: a child of cr_migrate that outlives it just long
// enough to finish a COMMIT its death left half done (docs/security.md,
// "cr_migrate killed at COMMIT").
//
// The sender sets its sources to die with it (PTRACE_O_EXITKILL) and then
// sends COMMIT, so a sender that dies in between would leave the sources
// dead and the receiver without COMMIT: no copy. The witness, holding a copy
// of the connection, sees the sender die while armed, makes sure the
// sources are dead (SIGKILL through pidfds: they are dying already unless
// the sender died before its first PTRACE_SETOPTIONS), sends COMMIT unless
// the sender's went out, and DONE. An unarmed witness only goes, and the
// receiver, seeing the connection end, restores nothing. One copy either way.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <ckpt/result.hpp>
#include <cstdint>
#include <memory>
#include <vector>

#include "util/fd.hpp"

namespace ckpt::migrate {

class CommitWitness {
 public:
  // Forks the witness, which keeps `conn` open. Call it before the freeze:
  // it copies this process.
  static Result<std::unique_ptr<CommitWitness>> start(int conn);
  // The sources (their leaders' PIDs, frozen by this process) are about to
  // be set to die with it, and COMMIT of `generation` to be sent.
  Status arm(uint64_t generation, const std::vector<pid_t>& leaders);
  // COMMIT went out: a witness must not send it again.
  void committed() { flag_->store(1, std::memory_order_release); }
  // The commit failed and the sources are about to be released: nothing to
  // finish any more.
  void disarm() { say('D'); }
  // Tells the witness to go (this process lives on) and reaps it.
  ~CommitWitness();

  CommitWitness(const CommitWitness&) = delete;
  CommitWitness& operator=(const CommitWitness&) = delete;

 private:
  CommitWitness() = default;
  void say(char what);
  pid_t pid_ = 0;
  UniqueFd ctl_;
  std::atomic<uint32_t>* flag_ = nullptr;  // shared with the witness
};

}  // namespace ckpt::migrate
