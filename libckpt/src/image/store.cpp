#include "image/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "util/fd.hpp"

namespace ckpt::image {

std::string generation_dir(const std::string& dir, uint64_t generation) {
  char name[32];
  std::snprintf(name, sizeof name, "gen-%06llu", static_cast<unsigned long long>(generation));
  return dir + "/" + name;
}

Result<std::vector<uint64_t>> list_generations(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return sys_error("opening checkpoint directory " + dir);
  std::vector<uint64_t> gens;
  while (dirent* e = ::readdir(d)) {
    unsigned long long g;
    char tail;
    if (std::sscanf(e->d_name, "gen-%llu%c", &g, &tail) == 1 && g > 0) gens.push_back(g);
  }
  ::closedir(d);
  std::sort(gens.begin(), gens.end());
  return gens;
}

Status ensure_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return sys_error("checkpoint directory " + dir);
    if (!S_ISDIR(st.st_mode)) return make_error(ENOTDIR, dir + " is not a directory");
    return {};
  }
  return sys_error("creating checkpoint directory " + dir);
}

void remove_stale_temps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    unsigned long long gen;
    int pid;
    if (std::sscanf(e->d_name, ".tmp-%llu-%d", &gen, &pid) == 2 && pid > 0 &&
        ::kill(pid, 0) != 0 && errno == ESRCH)
      stale.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  for (const std::string& t : stale) {
    if (DIR* td = ::opendir(t.c_str())) {
      while (dirent* f = ::readdir(td))
        if (f->d_name[0] != '.') ::unlink((t + "/" + f->d_name).c_str());
      ::closedir(td);
    }
    ::rmdir(t.c_str());
  }
}

Status fsync_dir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return sys_error("opening " + dir);
  if (::fsync(fd.get()) != 0) return sys_error("fsync " + dir);
  return {};
}

}  // namespace ckpt::image
