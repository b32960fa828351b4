// OutsideTcp (outside_tcp.hpp).
#include "job/outside_tcp.hpp"

#include <set>

#include "sockets/tcp.hpp"

namespace ckpt::job {

Status OutsideTcp::lock(const std::vector<pid_t>& members) {
  if (members.empty()) return {};
  const std::set<uint64_t> inodes = sockets::job_socket_inodes(members);
  const std::vector<uint64_t> job_sockets(inodes.begin(), inodes.end());
  // One network namespace per job (the root's): a node's part of a job.
  std::vector<sockets::Connection> conns = sockets::outside_connections(members[0], job_sockets);
  CKPT_TRY(sockets::lock_all(conns));
  conns_ = std::move(conns);
  return {};
}

void OutsideTcp::unlock() {
  sockets::unlock_all(conns_);
  conns_.clear();
}

Status OutsideTcp::park(const std::vector<dump::MemberDump*>& dumps, bool inside_too) {
  // Every connection is tried: the job is killed next whatever happens.
  Status first;
  for (const dump::MemberDump* d : dumps)
    for (const image::FileRecord& f : d->meta.files) {
      if (f.dup_of != -1 || !sockets::is_established(f)) continue;
      if (!inside_too && !sockets::is_outside(f)) continue;
      // Connections inside the job too: killed in repair mode they vanish
      // without a FIN, which would otherwise leave a closing socket holding
      // the connection's ports (for ever when the address moved away with
      // the job: cr_job migrate) where the job may be restored again.
      Status s;
      if (sockets::is_outside(f)) s = sockets::lock_connection(sockets::connection_of(f));
      if (s.ok()) s = sockets::park_connection(d->pid(), f.fd);
      if (!s.ok() && first.ok()) first = s;
    }
  conns_.clear();  // the locks outlive this checkpoint
  return first;
}

}  // namespace ckpt::job
