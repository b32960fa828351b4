// Owning file descriptor and small I/O helpers that retry on EINTR and short transfers.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <ckpt/result.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ckpt {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// A stat's modification time in nanoseconds.
inline int64_t mtime_ns(const struct stat& st) {
  return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// The target of the symbolic link `path` (/proc links among them).
Result<std::string> read_link(const std::string& path);
// The same, empty when it cannot be read (a process gone meanwhile).
std::string read_link_or_empty(const std::string& path);

// Writes all of buf at offset (pwrite) or at the current position (off < 0).
Status write_all(int fd, const void* buf, size_t len, const std::string& what, off_t off = -1);
// Reads exactly len bytes at offset; a short file is an error naming `what`.
Status read_exact(int fd, void* buf, size_t len, off_t off, const std::string& what);
// Reads a whole (small, e.g. /proc) file.
Result<std::string> read_file(const std::string& path);
// Replaces the small file `path` with `text` (mode 0600): written whole under
// a name of this thread's, then renamed, so a reader sees the old text or
// the new, never a part. Never follows a symbolic link at the temporary name.
Status replace_file(const std::string& path, const std::string& text);
// Closes every descriptor of this process but those in `keep` (negative
// ones ignored).
void close_all_except(std::vector<int> keep);

}  // namespace ckpt
