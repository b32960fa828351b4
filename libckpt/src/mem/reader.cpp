#include "mem/reader.hpp"

#include <fcntl.h>
#include <sys/uio.h>

#include <algorithm>
#include <string>
#include <vector>

#include "util/text.hpp"

namespace ckpt::mem {

namespace {
constexpr size_t kMaxIov = 1024;  // UIO_MAXIOV: 1025 gives EINVAL
}

Status RemoteReader::read_via_mem(uint64_t addr, uint64_t len, uint8_t* buf) {
  if (!mem_.valid()) {
    std::string path = "/proc/" + std::to_string(pid_) + "/mem";
    mem_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!mem_.valid()) return sys_error("opening " + path);
  }
  return read_exact(mem_.get(), buf, len, off_t(addr), "memory at " + hex(addr));
}

Status RemoteReader::read(const Range* ranges, size_t n, uint8_t* buf) {
  std::vector<iovec> remote;
  size_t i = 0;
  uint64_t skip = 0;  // bytes of ranges[i] already read
  while (i < n) {
    remote.clear();
    uint64_t total = 0;
    for (size_t k = i; k < n && remote.size() < kMaxIov; ++k) {
      uint64_t off = k == i ? skip : 0;
      remote.push_back(iovec{reinterpret_cast<void*>(ranges[k].addr + off), ranges[k].len - off});
      total += ranges[k].len - off;
    }
    iovec local{buf, total};
    ssize_t got = ::process_vm_readv(pid_, &local, 1, remote.data(), remote.size(), 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno != EFAULT && errno != EPERM && errno != ENOSYS)
        return sys_error("process_vm_readv");
      got = 0;
    }
    // Advance over what was read.
    uint64_t left = uint64_t(got);
    buf += left;
    while (left > 0) {
      uint64_t avail = ranges[i].len - skip;
      uint64_t take = std::min(avail, left);
      skip += take;
      left -= take;
      if (skip == ranges[i].len) {
        ++i;
        skip = 0;
      }
    }
    if (uint64_t(got) < total && i < n) {
      // The kernel stopped at an unreadable page: read the rest of this range the slow way.
      uint64_t len = ranges[i].len - skip;
      CKPT_TRY(read_via_mem(ranges[i].addr + skip, len, buf));
      buf += len;
      ++i;
      skip = 0;
    }
  }
  return {};
}

}  // namespace ckpt::mem
