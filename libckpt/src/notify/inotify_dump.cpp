#include <fcntl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "notify/inotify.hpp"

namespace ckpt::notify {

namespace {

// One "inotify wd:.. ino:.. sdev:.. mask:.. ignored_mask:.. fhandle-bytes:..
// fhandle-type:.. f_handle:.." line of fdinfo.
struct MarkLine {
  int wd = 0;
  unsigned long sdev = 0;
  unsigned mask = 0;
  int handle_type = 0;
  std::vector<unsigned char> handle;
};

// 1: parsed; 0: a watch whose file the kernel gives no handle for (the
// line ends after ignored_mask); -1: not an inotify line as expected.
int parse_mark(const std::string& line, MarkLine* m) {
  unsigned long ino, ignored;
  unsigned bytes;
  int used = 0;
  const int n =
      std::sscanf(line.c_str(),
                  "inotify wd:%d ino:%lx sdev:%lx mask:%x ignored_mask:%lx "
                  "fhandle-bytes:%x fhandle-type:%x f_handle:%n",
                  &m->wd, &ino, &m->sdev, &m->mask, &ignored, &bytes, &m->handle_type, &used);
  if (n == 5) return 0;
  if (n < 7 || used == 0 || bytes > MAX_HANDLE_SZ) return -1;
  const char* hex = line.c_str() + used;
  if (std::strlen(hex) < size_t(bytes) * 2) return -1;
  for (unsigned i = 0; i < bytes; ++i) {
    char pair[3] = {hex[2 * i], hex[2 * i + 1], 0};
    m->handle.push_back((unsigned char)std::strtoul(pair, nullptr, 16));
  }
  return 1;
}

// A mount point's field of mountinfo with its octal escapes (\040) undone.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out += char(std::strtol(s.substr(i + 1, 3).c_str(), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// A mount point in a mount table (`mountinfo`'s text) of the filesystem
// whose kernel device number (major << 20 | minor, as fdinfo prints it) is
// `sdev`, preferring a mount of the filesystem's root; "" if none.
std::string mount_of(const std::string& mountinfo, unsigned long sdev) {
  const unsigned maj = unsigned(sdev >> 20), min = unsigned(sdev & 0xfffff);
  std::istringstream in(mountinfo);
  std::string line, any;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    if (!(f >> id >> parent >> dev >> root >> point)) continue;
    unsigned a, b;
    if (std::sscanf(dev.c_str(), "%u:%u", &a, &b) != 2 || a != maj || b != min) continue;
    if (root == "/") return unescape(point);
    if (any.empty()) any = unescape(point);
  }
  return any;
}

// The mounts the watches of one instance are found on, each looked up in
// `pid`'s mount table and opened once (a program may watch thousands of
// files on a few filesystems).
class MountDirs {
 public:
  explicit MountDirs(pid_t pid) : pid_(pid) {}

  // An fd of the mount of filesystem `sdev`, for open_by_handle_at.
  Result<int> of(unsigned long sdev, const std::string& what) {
    if (auto it = open_.find(sdev); it != open_.end()) return it->second.get();
    const std::string proc = "/proc/" + std::to_string(pid_);
    if (!table_) {
      auto t = read_file(proc + "/mountinfo");
      table_ = t.ok() ? *t : "";
    }
    const std::string point = mount_of(*table_, sdev);
    if (point.empty())
      return make_error(ENOTSUP, what + ": watches a file on a filesystem not mounted here");
    UniqueFd dir(::open((proc + "/root" + point).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir.valid()) return sys_error(what + ": opening the mount " + point);
    const int fd = dir.get();
    open_.emplace(sdev, std::move(dir));
    return fd;
  }

 private:
  pid_t pid_;
  std::optional<std::string> table_;
  std::map<unsigned long, UniqueFd> open_;
};

}  // namespace

Result<std::vector<Watch>> read_watches(pid_t pid, const std::string& info,
                                        const std::string& what) {
  std::vector<Watch> out;
  MountDirs mounts(pid);
  std::istringstream in(info);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("inotify ")) continue;
    MarkLine m;
    const int parsed = parse_mark(line, &m);
    if (parsed < 0) return make_error(EPROTO, what + ": unexpected inotify fdinfo");
    const std::string wd = what + ": watch " + std::to_string(m.wd);
    if (parsed == 0)
      return make_error(ENOTSUP, wd + ": watches a file on a filesystem that gives no file "
                                      "handles (it cannot be found again): not supported");
    if (m.wd <= 0 || m.wd > kMaxWatchDescriptor)
      return make_error(ENOTSUP, wd + ": a watch descriptor above " +
                                     std::to_string(kMaxWatchDescriptor) + ": not supported");
    CKPT_ASSIGN(int mnt, mounts.of(m.sdev, wd));
    std::vector<unsigned char> buf(sizeof(file_handle) + m.handle.size());
    auto* fh = reinterpret_cast<file_handle*>(buf.data());
    fh->handle_bytes = unsigned(m.handle.size());
    fh->handle_type = m.handle_type;
    std::memcpy(fh->f_handle, m.handle.data(), m.handle.size());
    UniqueFd file(::open_by_handle_at(mnt, fh, O_PATH | O_CLOEXEC));
    if (!file.valid()) {
      if (errno == EPERM)
        return make_error(EPERM, wd + ": finding the watched file needs CAP_DAC_READ_SEARCH");
      if (errno == ESTALE)
        return make_error(ENOTSUP, wd + ": watches a file that is gone: not supported");
      return sys_error(wd + ": finding the watched file");
    }
    const std::string path = read_link_or_empty("/proc/self/fd/" + std::to_string(file.get()));
    if (!path.starts_with("/") || path.ends_with(" (deleted)"))
      return make_error(
          ENOTSUP, wd + ": watches a file no longer in the tree (" + path + "): not supported");
    out.push_back({m.wd, m.mask, path});
  }
  // fdinfo lists the newest watch first.
  std::sort(out.begin(), out.end(), [](const Watch& a, const Watch& b) { return a.wd < b.wd; });
  return out;
}

}  // namespace ckpt::notify
