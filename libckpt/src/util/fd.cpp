#include "util/fd.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace ckpt {

Result<std::string> read_link(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) return sys_error("readlink " + path);
  return std::string(buf, size_t(n));
}

std::string read_link_or_empty(const std::string& path) {
  auto r = read_link(path);
  return r.ok() ? *r : std::string();
}

Status write_all(int fd, const void* buf, size_t len, const std::string& what, off_t off) {
  auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = off < 0 ? ::write(fd, p, len) : ::pwrite(fd, p, len, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("writing " + what);
    }
    if (n == 0) return make_error(EIO, "writing " + what + ": no progress");
    p += n;
    len -= size_t(n);
    if (off >= 0) off += n;
  }
  return {};
}

Status read_exact(int fd, void* buf, size_t len, off_t off, const std::string& what) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::pread(fd, p, len, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("reading " + what);
    }
    if (n == 0) return make_error(EIO, what + " is truncated");
    p += n;
    len -= size_t(n);
    off += n;
  }
  return {};
}

Result<std::string> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return sys_error(path);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("reading " + path);
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

Status replace_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::gettid());
  ::unlink(tmp.c_str());  // a killed writer's leftover under a reused TID
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return sys_error("creating " + tmp);
  Status st = write_all(fd.get(), text.data(), text.size(), tmp);
  fd.reset();
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = sys_error("renaming " + tmp);
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

void close_all_except(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned lo = 0;
  for (int k : keep) {
    if (k < 0) continue;
    if (unsigned(k) > lo) ::syscall(SYS_close_range, lo, unsigned(k) - 1, 0);
    lo = std::max(lo, unsigned(k) + 1);
  }
  ::syscall(SYS_close_range, lo, ~0u, 0);
}

}  // namespace ckpt
