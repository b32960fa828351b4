#include "job/members.hpp"

#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dump/collect.hpp"
#include "proc/maps.hpp"
#include "tty/pty.hpp"

namespace ckpt::job {

SharedOwners shared_memory_owners(const std::vector<proc::Member>& members) {
  SharedOwners owner;
  for (const proc::Member& m : members) {
    if (m.zombie) continue;
    auto maps = proc::read_maps(m.pid);
    if (!maps.ok()) continue;  // the member's describe step reports it
    for (const proc::MapEntry& e : *maps)
      if (auto o = dump::shared_object_of(e)) owner.emplace(*o, m.pid);
  }
  return owner;
}

bool frozen_has(const std::vector<proc::Member>& members, pid_t pid) {
  for (const proc::Member& m : members)
    if (m.pid == pid && !m.zombie) return true;
  return false;
}

Status check_terminals(const std::vector<proc::Member>& members,
                       const std::vector<dump::MemberDump*>& dumps) {
  std::vector<const image::ImageMeta*> metas;
  for (const dump::MemberDump* d : dumps) metas.push_back(&d->meta);
  std::vector<tty::SessionMember> in_job;
  for (const proc::Member& m : members) in_job.push_back({m.pid, m.pgid, m.sid});
  for (const tty::Controlling& c : tty::controlling_ttys(metas))
    CKPT_TRY(tty::check_controlling(c, in_job));
  return {};
}

std::vector<image::JobShare> find_shared_files(const std::vector<dump::MemberDump*>& dumps) {
  std::vector<image::JobShare> out;
  for (size_t b = 1; b < dumps.size(); ++b)
    for (const image::FileRecord& fb : dumps[b]->meta.files) {
      if (fb.dup_of != -1 || fb.kind == image::FileKind::kInheritStdio) continue;
      bool found = false;
      for (size_t a = 0; a < b && !found; ++a)
        for (const image::FileRecord& fa : dumps[a]->meta.files) {
          if (fa.dup_of != -1 || fa.dev != fb.dev || fa.ino != fb.ino) continue;
          if (::syscall(SYS_kcmp, dumps[a]->pid(), dumps[b]->pid(), KCMP_FILE, fa.fd, fb.fd) == 0) {
            out.push_back({dumps[b]->pid(), fb.fd, dumps[a]->pid(), fa.fd});
            found = true;
            break;
          }
        }
    }
  return out;
}

image::JobMeta job_meta(const std::vector<proc::Member>& members, bool tree, uint64_t generation,
                        const std::array<uint8_t, 16>& chain_id) {
  image::JobMeta jm;
  jm.generation = generation;
  jm.chain_id = chain_id;
  for (const proc::Member& m : members)
    jm.members.push_back({m.pid, m.ppid, m.pgid, m.sid, m.zombie ? image::kMemberZombie : 0u,
                          m.zombie ? m.exit_status : 0});
  if (tree) jm.members[0].flags |= image::kMemberTree;
  // A member of a session whose leader has a controlling terminal, without
  // one itself (it dropped it, or never had it): it must not get one back.
  for (size_t i = 0; i < members.size(); ++i) {
    const proc::Member& m = members[i];
    if (m.ctty || m.zombie || m.sid == m.pid) continue;
    for (const proc::Member& leader : members)
      if (leader.pid == m.sid && leader.ctty) jm.members[i].flags |= image::kMemberNoCtty;
  }
  return jm;
}

}  // namespace ckpt::job
