#include "proc/maps.hpp"
#include "util/text.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "util/fd.hpp"

namespace ckpt::proc {

std::vector<MapEntry> parse_maps(const std::string& text) {
  std::vector<MapEntry> out;
  for_each_line(text, [&](const std::string& line) {
    MapEntry e;
    char perms[5] = {};
    int path_at = -1;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
                    &e.start, &e.end, perms, &e.offset, &e.dev_major, &e.dev_minor, &e.inode,
                    &path_at) < 7)
      return true;
    e.r = perms[0] == 'r';
    e.w = perms[1] == 'w';
    e.x = perms[2] == 'x';
    e.shared = perms[3] == 's';
    if (path_at > 0 && size_t(path_at) < line.size()) e.path = line.substr(size_t(path_at));
    out.push_back(std::move(e));
    return true;
  });
  return out;
}

Result<std::vector<MapEntry>> read_maps(pid_t pid) {
  CKPT_ASSIGN(std::string text, read_file("/proc/" + std::to_string(pid) + "/maps"));
  return parse_maps(text);
}

Result<StatMm> read_stat_mm(pid_t pid) {
  CKPT_ASSIGN(std::string text, read_file("/proc/" + std::to_string(pid) + "/stat"));
  // The command name may contain spaces and parentheses: fields start after the last ')'.
  size_t rp = text.rfind(')');
  if (rp == std::string::npos)
    return make_error(EIO, "malformed /proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(text.substr(rp + 2));
  std::vector<std::string> f(3, "");  // pad so f[i] is field i
  std::string tok;
  while (in >> tok) f.push_back(tok);
  if (f.size() < 52) return make_error(EIO, "short /proc/" + std::to_string(pid) + "/stat");
  auto u = [&](int i) { return std::strtoull(f[size_t(i)].c_str(), nullptr, 10); };
  StatMm s;
  s.state = f[3][0];
  s.flags = u(9);
  s.ppid = pid_t(u(4));
  s.pgid = pid_t(u(5));
  s.sid = pid_t(u(6));
  s.tty_nr = u(7);
  if (f.size() > 52) s.exit_code = int(u(52));
  s.start_code = u(26);
  s.end_code = u(27);
  s.start_stack = u(28);
  s.start_data = u(45);
  s.end_data = u(46);
  s.start_brk = u(47);
  s.arg_start = u(48);
  s.arg_end = u(49);
  s.env_start = u(50);
  s.env_end = u(51);
  return s;
}

}  // namespace ckpt::proc
