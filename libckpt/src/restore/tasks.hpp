// After the address space is rebuilt: creates the checkpointed threads with
// their original TIDs (clone3 with set_tid, injected into the leader) and
// gives every thread, then the process, the state the kernel keeps for them:
// alternate signal stack, TID address, robust futex list, rseq, seccomp
// filters, queued signals, registers and signal mask; timers, limits,
// personality and prctl flags. Every thread keeps all signals blocked until
// its real mask is loaded last, so nothing is delivered mid-restore.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

#include "image/model.hpp"
#include "proc/inject.hpp"
#include "restore/address_space.hpp"

namespace ckpt::restore {

class TaskRestorer {
 public:
  TaskRestorer(pid_t pid, const image::ImageMeta& meta, AddressSpaceBuilder& builder)
      : pid_(pid), meta_(meta), builder_(builder), tids_{pid} {}

  // Creates every thread but the leader, stopped; with their checkpointed
  // TIDs when the process has its own PID back.
  Status create_threads(proc::RemoteSyscall& leader);
  // Everything of non-leader thread `i`, registers included: it is then ready to run.
  Status restore_thread(size_t i);
  // The leader's per-thread calls and the process-wide state; the caller
  // loads the leader's registers with its last call.
  Status restore_leader();
  // Loads the real signal masks (the threads stay stopped: nothing is
  // delivered yet). release() does it too if it was not done.
  Status load_masks();
  // Lets every thread run, leader last.
  Status release();

 private:
  Status thread_calls(proc::RemoteSyscall& rs, size_t i);
  Status process_calls(proc::RemoteSyscall& rs);
  Status posix_timers(proc::RemoteSyscall& rs);
  Status install_seccomp(proc::RemoteSyscall& rs, const image::SeccompFilter& f);
  Status queue_signals(proc::RemoteSyscall& rs, const std::vector<image::SigInfo>& sigs, pid_t tid);
  // Injection into `tid` through the trampoline, on a stack inside it.
  Result<proc::RemoteSyscall> remote(pid_t tid);
  Result<long> sys(proc::RemoteSyscall& rs, const std::string& what, long nr, uint64_t a1 = 0,
                   uint64_t a2 = 0, uint64_t a3 = 0, uint64_t a4 = 0);

  pid_t pid_;
  const image::ImageMeta& meta_;
  AddressSpaceBuilder& builder_;
  std::vector<pid_t> tids_;  // the restored threads, in meta_.threads order
  bool masks_loaded_ = false;
};

}  // namespace ckpt::restore
