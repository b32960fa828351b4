// System calls run in a process being rebuilt in one round trip each batch
// (proc::RemoteSyscall::call_batch) instead of one per call: an injected
// call costs two ptrace stops, costly in a VM, and rebuilding a small
// process's mappings takes tens of them.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "proc/inject.hpp"

namespace ckpt::restore {

// Where a batch lives in the tracee: the loop's code, the call table and a
// pool for strings the calls point to (all in the restore's trampoline).
struct BatchArea {
  uint64_t code = 0;
  uint64_t table = 0;
  size_t max_calls = 0;
  uint64_t strings = 0;
  size_t strings_len = 0;
};

class CallBatch {
 public:
  CallBatch(pid_t pid, proc::RemoteSyscall& rs, const BatchArea& area)
      : pid_(pid), rs_(rs), area_(area) {}

  // Adds a call; an error names it as sys_error(what).context(where).
  // Returns its index for result().
  size_t add(const char* what, const std::string& where, long nr, uint64_t a1 = 0, uint64_t a2 = 0,
             uint64_t a3 = 0, uint64_t a4 = 0, uint64_t a5 = 0, uint64_t a6 = 0);
  // The same for a call whose failure is the caller's to judge (result()).
  size_t add_may_fail(long nr, uint64_t a1 = 0, uint64_t a2 = 0, uint64_t a3 = 0);
  // The tracee address where `s` (NUL-terminated) will be when the calls
  // added from now on run.
  Result<uint64_t> add_string(const std::string& s);

  // Runs every call added, in order, in as few round trips as the table and
  // the pool allow; stops at the first failure of a call that may not fail
  // and returns its error. Once per batch.
  Status run();
  // A call's raw answer (a negative errno on failure), once run.
  long result(size_t i) const { return calls_[i].ret; }

 private:
  struct Named {
    const char* what;
    std::string where;
    int pool;  // which fill of the string pool its strings are in
  };
  pid_t pid_;
  proc::RemoteSyscall& rs_;
  BatchArea area_;
  std::vector<proc::RemoteSyscall::BatchCall> calls_;
  std::vector<Named> names_;
  std::vector<std::string> pools_{1};  // one per fill of the pool, in order
};

}  // namespace ckpt::restore
