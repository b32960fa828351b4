#include "migrate/staging.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "image/store.hpp"

namespace ckpt::migrate {

namespace {

constexpr const char* kPrefix = "ckpt-recv-";

void remove_tree(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      std::string p = dir + "/" + n;
      if (e->d_type == DT_DIR)
        remove_tree(p);
      else
        ::unlink(p.c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// Content is received straight into a mapping of pages.img. On a tmpfs
// with 4 KiB pages every page costs a fault, an allocation and a memcg
// charge: writing 1 GiB into /dev/shm ran at ~1.0 GB/s here, slower than
// the link; with huge pages at 2.1-2.7 GB/s (docs/performance.md). The
// system's shmem huge page policy is usually "never", so the receiver
// mounts a tmpfs of its own ("within_size": the small files stay small).
bool mount_huge_tmpfs(const std::string& dir) {
  return ::mount("ckpt-recv", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "mode=0700,huge=within_size") == 0;
}

// A directory (not a link to one) of this user: in a shared /tmp another
// user could plant a stale-looking name as a link to anything.
bool own_real_dir(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid();
}

}  // namespace

Result<Staging> make_staging(const std::string& keep_dir, const std::string& name) {
  Staging s;
  if (!keep_dir.empty()) {
    s.dir = keep_dir + "/.recv-" + image::temp_prefix_host() + "-" + name;
    if (::mkdir(s.dir.c_str(), 0700) != 0) return sys_error("creating " + s.dir);
    return s;
  }
  std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                     : ::getenv("TMPDIR")            ? ::getenv("TMPDIR")
                                                     : "/tmp";
  CKPT_ASSIGN(s, make_locked_dir(base, kPrefix));
  s.mounted = mount_huge_tmpfs(s.dir);
  return s;
}

Result<Staging> make_locked_dir(const std::string& base, const char* prefix) {
  Staging s;
  // The lock first, then the directory named after it: a directory is
  // never seen without its (held) lock.
  std::string tmpl = base + "/" + prefix + std::to_string(::getpid()) + "-XXXXXX.lock";
  s.lock.reset(::mkostemps(tmpl.data(), 5, O_CLOEXEC));
  if (!s.lock.valid()) return sys_error("creating a private directory in " + base);
  s.lock_path = tmpl;
  s.dir = tmpl.substr(0, tmpl.size() - 5);
  if (::flock(s.lock.get(), LOCK_EX) != 0 || ::mkdir(s.dir.c_str(), 0700) != 0) {
    Error e = sys_error("creating " + s.dir);
    ::unlink(s.lock_path.c_str());
    return e;
  }
  return s;
}

void remove_stale_locked_dirs(const std::string& base, const char* prefix) {
  DIR* d = ::opendir(base.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0 && n.size() > 5 && n.compare(n.size() - 5, 5, ".lock") == 0)
      names.push_back(n);
  }
  ::closedir(d);
  for (const std::string& n : names) {
    const std::string path = base + "/" + n;
    UniqueFd l(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (!l.valid() || ::flock(l.get(), LOCK_EX | LOCK_NB) != 0) continue;  // in use
    const std::string dir = path.substr(0, path.size() - 5);
    struct stat ls;
    if (::fstat(l.get(), &ls) != 0 || ls.st_uid != ::geteuid() || !own_real_dir(dir)) continue;
    ::umount2(dir.c_str(), MNT_DETACH);  // EINVAL when it is a plain directory
    remove_tree(dir);
    ::unlink(path.c_str());
  }
}

void remove_staging(const Staging& s) {
  if (s.mounted) {
    ::umount2(s.dir.c_str(), MNT_DETACH);  // frees everything in it at once
    ::rmdir(s.dir.c_str());
  } else {
    remove_tree(s.dir);
  }
  if (!s.lock_path.empty()) ::unlink(s.lock_path.c_str());
}

void remove_stale_staging() {
  for (const char* base :
       std::initializer_list<const char*>{"/dev/shm", ::getenv("TMPDIR"), "/tmp"}) {
    if (!base) continue;
    remove_stale_locked_dirs(base, kPrefix);
    DIR* d = ::opendir(base);
    if (!d) continue;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, kPrefix, std::strlen(kPrefix)) == 0) names.push_back(e->d_name);
    ::closedir(d);
    for (const std::string& n : names) {
      const std::string path = std::string(base) + "/" + n;
      if (n.size() > 5 && n.compare(n.size() - 5, 5, ".lock") == 0) continue;  // done above
      if (int pid = 0; std::sscanf(n.c_str(), "ckpt-recv-%d-", &pid) == 1 && pid > 1 &&
                       ::access((path + ".lock").c_str(), F_OK) != 0 && ::kill(pid, 0) != 0 &&
                       errno == ESRCH && own_real_dir(path))
        remove_tree(path);  // left by a receiver from before the lock files
    }
  }
}

}  // namespace ckpt::migrate
