#include "proc/fd_links.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>

#include "util/text.hpp"

namespace ckpt::proc {

std::vector<FdLink> fd_links(pid_t pid) {
  std::vector<FdLink> out;
  const std::string dir = proc_path(pid, "fd");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char link[4096];
    ssize_t n = ::readlink((dir + "/" + e->d_name).c_str(), link, sizeof link);
    if (n > 0) out.push_back({std::atoi(e->d_name), std::string(link, size_t(n))});
  }
  ::closedir(d);
  return out;
}

}  // namespace ckpt::proc
