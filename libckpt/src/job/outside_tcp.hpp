// The job's TCP connections to peers outside it (--tcp-established), held
// back while it is checkpointed (sockets/tcp_lock.hpp).
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

#include "dump/member.hpp"
#include "sockets/tcp_lock.hpp"

namespace ckpt::job {

class OutsideTcp {
 public:
  OutsideTcp() = default;
  OutsideTcp(const OutsideTcp&) = delete;
  OutsideTcp& operator=(const OutsideTcp&) = delete;
  // Unlocks everything still locked unless park() kept it.
  ~OutsideTcp() { unlock(); }

  // Locks every established connection of the frozen `members` whose peer
  // is not in the job: from here on their state cannot change underneath
  // the checkpoint (nothing this node sends for them leaves).
  Status lock(const std::vector<pid_t>& members);
  // The job runs again: its connections send again.
  void unlock();
  // The job is about to be killed (kill_after): every saved outside
  // connection goes into repair mode, so the kill closes it silently, and
  // the locks stay until the restore rebuilds the connections. `inside_too`:
  // the connections between members as well (no FIN, no closing leftover).
  Status park(const std::vector<dump::MemberDump*>& dumps, bool inside_too);

  size_t count() const { return conns_.size(); }

 private:
  std::vector<sockets::Connection> conns_;
};

}  // namespace ckpt::job
