#include "restore/uffd_fill.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "mem/kernel_abi.hpp"
#include "proc/fd_links.hpp"
#include "util/fd.hpp"

namespace ckpt::restore {

namespace {

constexpr uint64_t kPage = image::kPageSize;

}  // namespace

UffdFill::Thp UffdFill::thp_mode() {
  auto text = read_file("/sys/kernel/mm/transparent_hugepage/enabled");
  if (!text.ok()) return Thp::kNever;  // no THP in this kernel
  if (text->find("[always]") != std::string::npos) return Thp::kAlways;
  if (text->find("[madvise]") != std::string::npos) return Thp::kMadvise;
  return Thp::kNever;
}

std::vector<mem::Range> UffdFill::eligible(const std::vector<image::VmaRecord>& vmas, Thp thp) {
  std::vector<mem::Range> out;
  for (const image::VmaRecord& v : vmas) {
    if (v.is_file() || (v.flags & image::kVmaShared) || v.is_special()) continue;
    const bool huge = thp == Thp::kAlways
                          ? !(v.advice & image::kAdvNoHugePage)
                          : thp == Thp::kMadvise && (v.advice & image::kAdvHugePage);
    if (!huge) out.push_back(mem::Range{v.start, v.end - v.start});
  }
  return out;
}

UffdFill::UffdFill(pid_t pid, const CallFn& call, const std::vector<mem::Range>& ranges)
    : pid_(pid) {
  if (ranges.empty()) return;
  // User-mode faults only: nobody serves faults here, and a kernel-mode
  // access to a page not filled yet (none is made) fails with EFAULT
  // instead of waiting. It needs no privilege either (vm.unprivileged_userfaultfd).
  auto made = call(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kabi::kUffdUserModeOnly);
  if (!made.ok() || *made < 0) return;
  const int target_fd = int(*made);
  auto taken = proc::take_fd(pid, target_fd);
  (void)call(SYS_close, uint64_t(target_fd));
  if (!taken.ok()) return;
  UniqueFd fd = std::move(*taken);
  uffdio_api api{};
  api.api = UFFD_API;
  if (::ioctl(fd.get(), UFFDIO_API, &api) != 0) return;
  for (const mem::Range& r : ranges) {
    uffdio_register reg{};
    reg.range.start = r.addr;
    reg.range.len = r.len;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (::ioctl(fd.get(), UFFDIO_REGISTER, &reg) == 0 && (reg.ioctls & (1ull << _UFFDIO_COPY)))
      ranges_.push_back(r);
  }
  std::sort(ranges_.begin(), ranges_.end(), [](auto& a, auto& b) { return a.addr < b.addr; });
  if (!ranges_.empty()) fd_ = std::move(fd);
}

bool UffdFill::covers(uint64_t addr, uint64_t len) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), addr,
                             [](uint64_t a, const mem::Range& r) { return a < r.addr; });
  if (it == ranges_.begin()) return false;
  --it;
  return addr >= it->addr && addr + len <= it->end();
}

Status UffdFill::copy(uint64_t dst, const void* src, uint64_t len) const {
  auto from = static_cast<const uint8_t*>(src);
  for (int again = 0; len > 0;) {
    uffdio_copy c{};
    c.dst = dst;
    c.src = reinterpret_cast<uint64_t>(from);
    c.len = len;
    if (::ioctl(fd_.get(), UFFDIO_COPY, &c) == 0) return {};
    const int err = errno;
    uint64_t done = c.copy > 0 ? uint64_t(c.copy) : 0;
    if (done == 0 && err == EEXIST) {  // this page is there already: written over as before
      iovec l{const_cast<uint8_t*>(from), kPage}, r{reinterpret_cast<void*>(dst), kPage};
      if (::process_vm_writev(pid_, &l, 1, &r, 1, 0) != ssize_t(kPage))
        return sys_error("writing memory into the new process");
      done = kPage;
    } else if (done == 0 && (err != EAGAIN || ++again > 1000)) {
      return sys_error("UFFDIO_COPY into the new process", err);
    }
    dst += done;
    from += done;
    len -= done;
  }
  return {};
}

}  // namespace ckpt::restore
