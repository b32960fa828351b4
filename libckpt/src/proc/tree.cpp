#include "proc/tree.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include "proc/maps.hpp"
#include "proc/status.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::proc {

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = ::opendir(proc_path(pid, "task").c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    auto text = read_file(proc_path(pid, "task/") + e->d_name + "/children");
    if (!text.ok()) continue;
    std::istringstream in(*text);
    pid_t c;
    while (in >> c) out.push_back(c);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

Status add(pid_t pid, bool tree, std::vector<Member>* out) {
  auto st = proc::read_stat_mm(pid);
  if (!st.ok()) return make_error(ESRCH, "no process with PID " + std::to_string(pid));
  Member m;
  m.pid = pid;
  m.ppid = st->ppid;
  m.pgid = st->pgid;
  m.sid = st->sid;
  m.ctty = st->tty_nr != 0;
  m.zombie = st->state == 'Z';
  m.exit_status = st->exit_code;
  out->push_back(m);
  std::vector<pid_t> kids = children_of(pid);
  if (!tree && !kids.empty())
    return make_error(ENOTSUP, "PID " + std::to_string(pid) + " has child process " +
                                   std::to_string(kids[0]) + " (" + comm_of(kids[0]) +
                                   "): checkpoint the whole tree with --tree");
  for (pid_t k : kids) {
    Status s = add(k, tree, out);
    // A child that exited and was reaped meanwhile is simply not a member.
    if (!s.ok() && !(s.error().code == ESRCH && k != pid)) return s;
  }
  return {};
}

}  // namespace

Result<std::vector<Member>> list_job(pid_t root, bool tree) {
  std::vector<Member> out;
  CKPT_TRY(add(root, tree, &out));
  if (out[0].zombie) return make_error(ESRCH, "PID " + std::to_string(root) + " is a zombie");
  return out;
}

std::string membership_change(const std::vector<pid_t>& was, const std::vector<pid_t>& now) {
  auto list = [](const std::vector<pid_t>& a, const std::vector<pid_t>& b, bool comm) {
    std::string out;
    for (pid_t p : a) {
      if (std::find(b.begin(), b.end(), p) != b.end()) continue;
      out += (out.empty() ? "PID " : ", ") + std::to_string(p);
      if (auto c = read_file("/proc/" + std::to_string(p) + "/comm"); comm && c.ok() && !c->empty())
        out += " (" + c->substr(0, c->find('\n')) + ")";
    }
    return out;
  };
  const std::string left = list(was, now, false), joined = list(now, was, true);
  std::string out = left.empty() ? "" : left + " left the job";
  if (!joined.empty()) out += (out.empty() ? "" : ", ") + joined + " joined it";
  return out;
}

}  // namespace ckpt::proc
