#include "image/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "image/format.hpp"
#include "util/fd.hpp"
#include "util/private_dir.hpp"

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
    // Only canonical names count: "gen-" and at least six digits, nothing else,
    // exactly as generation_dir() spells them.
    const char* digits = e->d_name + 4;
    size_t n = std::strlen(digits);
    if (std::strncmp(e->d_name, "gen-", 4) != 0 || n < 6 || n > 19 ||
        std::strspn(digits, "0123456789") != n)
      continue;
    uint64_t g = std::strtoull(digits, nullptr, 10);
    if (g > 0 && generation_dir(dir, g) == dir + "/" + e->d_name) gens.push_back(g);
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
    return check_private_dir(dir);
  }
  return sys_error("creating checkpoint directory " + dir);
}

std::string temp_prefix_host() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  std::string h = host;
  for (char& c : h)
    if (c == '/' || c == '-') c = '_';
  return h;
}

std::string temp_dir_name(const std::string& dir, uint64_t generation) {
  return dir + "/.tmp-" + std::to_string(generation) + "-" + temp_prefix_host() + "-" +
         std::to_string(::getpid());
}

void remove_stale_temps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  const std::string mine = temp_prefix_host();
  while (dirent* e = ::readdir(d)) {
    // ".tmp-GEN-HOST-PID": only this host's writers can be judged dead here
    // (the directory may be shared between nodes).
    std::string name = e->d_name;
    size_t dash = name.rfind('-');
    if (name.rfind(".tmp-", 0) != 0 || dash == std::string::npos) continue;
    size_t host_at = name.find('-', 5);
    if (host_at == std::string::npos || host_at >= dash) continue;
    if (name.substr(host_at + 1, dash - host_at - 1) != mine) continue;
    int pid = std::atoi(name.c_str() + dash + 1);
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(dir + "/" + name);
  }
  ::closedir(d);
  remove_stale_removals(dir);
  for (const std::string& t : stale) {
    if (DIR* td = ::opendir(t.c_str())) {
      while (dirent* f = ::readdir(td))
        if (f->d_name[0] != '.') ::unlink((t + "/" + f->d_name).c_str());
      ::closedir(td);
    }
    remove_generation_files(t);  // members' directories, then the directory
  }
}

void remove_generation_files(const std::string& d) {
  // Only the names a generation holds: a job's members are one level down.
  if (DIR* dd = ::opendir(d.c_str())) {
    while (dirent* e = ::readdir(dd))
      if (std::strncmp(e->d_name, "member-", 7) == 0) remove_generation_files(d + "/" + e->d_name);
    ::closedir(dd);
  }
  for (const char* f : {kPagesFile, kAddrFile, kMetaFile, "job.img"})
    ::unlink((d + "/" + f).c_str());
  ::rmdir(d.c_str());
}

static std::string removal_dir_name(const std::string& dir, uint64_t generation) {
  return dir + "/" + kRemovalPrefix + std::to_string(generation) + "-" + temp_prefix_host() + "-" +
         std::to_string(::getpid());
}

void remove_stale_removals(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> doomed;
  // Renamed away already: garbage whoever left it (another host's remover
  // deleting the same names at the same time only sees ENOENT).
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, kRemovalPrefix, std::strlen(kRemovalPrefix)) == 0)
      doomed.push_back(dir + "/" + e->d_name);
  ::closedir(d);
  for (const std::string& r : doomed) remove_generation_files(r);
}

void remove_generations_before(const std::string& dir, uint64_t generation) {
  auto gens = list_generations(dir);
  if (!gens.ok()) return;
  // Newest first: an interrupted removal leaves the oldest generations, a
  // chain whose every generation still has its parent.
  std::vector<std::string> renamed;
  for (auto g = gens->rbegin(); g != gens->rend(); ++g) {
    if (*g >= generation) continue;
    const std::string away = removal_dir_name(dir, *g);
    remove_generation_files(away);  // left by an earlier process of this PID
    if (::rename(generation_dir(dir, *g).c_str(), away.c_str()) == 0) renamed.push_back(away);
  }
  for (const std::string& r : renamed) remove_generation_files(r);
  remove_stale_removals(dir);
}

Status fsync_dir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return sys_error("opening " + dir);
  if (::fsync(fd.get()) != 0) return sys_error("fsync " + dir);
  return {};
}

}  // namespace ckpt::image
