#include "job/previous.hpp"

#include "image/chain_link.hpp"
#include "image/generation_dir.hpp"
#include "image/store.hpp"

namespace ckpt::job {

Result<PreviousJob> open_previous(const std::string& gen_dir) {
  PreviousJob p;
  CKPT_ASSIGN(p.job, image::read_job_or_root(gen_dir));
  const pid_t root = p.job.members[0].pid;
  for (const image::JobMember& m : p.job.members) {
    if (m.zombie()) continue;
    CKPT_ASSIGN(auto r, image::SnapshotReader::open(image::member_dir(gen_dir, m.pid, root)));
    p.members.emplace(m.pid, std::move(r));
  }
  // An incremental continues what the generation binds, as a restore reads it.
  const image::SnapshotReader& top = *p.root();
  CKPT_TRY(image::check_job_link(top, p.job));
  for (const image::JobMember& m : p.job.members)
    if (!m.zombie() && m.pid != root)
      CKPT_TRY(image::check_member_link(*p.members.at(m.pid), m, top.meta().link.binds_job));
  return p;
}

}  // namespace ckpt::job
