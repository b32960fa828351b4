// A job that outlived its launcher (cr_run --resume): not cr_run's child, so
// its exit status would go to its new parent. cr_run does not kill it to
// make it a child (a job that then failed to restore would be lost);
// instead it watches the job's root as a ptrace tracer, which the kernel
// tells how the root ended (waitpid), and lets go of it while a checkpoint
// needs to trace the job itself.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <utility>
#include <vector>

namespace cr_run {

class Adopted {
 public:
  explicit Adopted(pid_t root) : root_(root) {}
  // Starts tracing the root (PTRACE_SEIZE: it does not stop).
  ckpt::Status watch();
  // Stops tracing it: before a checkpoint, which traces the job itself.
  ckpt::Status let_go();
  // A waitpid report of the root that is a ptrace stop: it goes on as it
  // would untraced (signals delivered, group stops kept). Returns false if
  // `status` is not a stop (the root ended: the caller handles it).
  bool resume_from(int status);
  bool watching() const { return watching_; }
  // Notes the root's descendants as they are now (PID and start time).
  void remember_members();
  // SIGKILL to the descendants noted last that still run (the same PID
  // and start time): the root died without its exit stop (killed while a
  // checkpoint traced it, or by a SIGKILL the kernel did not stop for),
  // and its members, orphaned to another parent, hold the PIDs a restart
  // needs.
  void end_remembered() const;

 private:
  pid_t root_;
  bool watching_ = false;
  std::vector<std::pair<pid_t, uint64_t>> members_;
};

}  // namespace cr_run
