// Controlling terminals among a job's ptys (pty.hpp).
#include <algorithm>

#include "tty/pty.hpp"

namespace ckpt::tty {

std::vector<Controlling> controlling_ttys(const std::vector<const image::ImageMeta*>& metas) {
  std::vector<Controlling> out;
  for (const image::ImageMeta* m : metas)
    for (const image::FileRecord& f : m->files) {
      if (!is_master(f.kind) || f.dup_of != -1 || f.params.size() < image::kPtyParams) continue;
      const pid_t sid = pid_t(f.params[image::kPtySession]);
      const uint64_t index = f.params[image::kPtyIndex];
      if (sid <= 0) continue;
      if (std::any_of(out.begin(), out.end(),
                      [&](const Controlling& c) { return c.index == index; }))
        continue;
      out.push_back({index, sid, pid_t(f.params[image::kPtyForeground])});
    }
  return out;
}

Status check_controlling(const Controlling& c, const std::vector<SessionMember>& members) {
  const std::string what = "/dev/pts/" + std::to_string(c.index);
  auto member = [&](pid_t pid) -> const SessionMember* {
    for (const SessionMember& m : members)
      if (m.pid == pid) return &m;
    return nullptr;
  };
  const SessionMember* leader = member(c.session);
  if (!leader || leader->sid != leader->pid)
    return make_error(ENOTSUP, what + ": controlling terminal of session " +
                                   std::to_string(c.session) +
                                   ", whose leader is not in the job: checkpoint the whole "
                                   "session (--tree of its leader or an ancestor)");
  if (c.foreground <= 0) return {};
  const SessionMember* fg = member(c.foreground);
  if (!fg || fg->pgid != fg->pid || fg->sid != c.session)
    return make_error(ENOTSUP, what + ": its foreground process group " +
                                   std::to_string(c.foreground) +
                                   " has no leader in the job: not supported");
  return {};
}

}  // namespace ckpt::tty
