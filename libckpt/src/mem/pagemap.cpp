#include "mem/pagemap.hpp"

#include <fcntl.h>

#include <string>

#include "image/model.hpp"
#include "mem/kernel_abi.hpp"

namespace ckpt::mem {

namespace {
using kabi::kPmFileOrShared;
using kabi::kPmPresent;
using kabi::kPmSwapped;
constexpr size_t kBatchEntries = 64 * 1024;  // 256 MiB of address space per read
}  // namespace

Result<Pagemap> Pagemap::open(pid_t pid) {
  Pagemap pm;
  std::string path = "/proc/" + std::to_string(pid) + "/pagemap";
  pm.fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!pm.fd_.valid()) return sys_error("opening " + path);
  pm.buf_.resize(kBatchEntries);
  return pm;
}

Status Pagemap::select(uint64_t start, uint64_t end, PageSelect sel, std::vector<Range>& out) {
  const uint64_t ps = image::kPageSize;
  const size_t first = out.size();  // ranges never span two calls (two VMAs)
  for (uint64_t addr = start; addr < end;) {
    size_t n = std::min<uint64_t>(kBatchEntries, (end - addr) / ps);
    CKPT_TRY(read_exact(fd_.get(), buf_.data(), n * 8, off_t(addr / ps * 8), "pagemap"));
    for (size_t i = 0; i < n; ++i) {
      uint64_t e = buf_[i];
      // A marker holds nothing, and reading it may fail: in a private file
      // mapping past the file's end (the PROT_NONE gap between a library's
      // segments) /proc/PID/mem answers EIO. A process tracked by another
      // chain has markers wherever it never wrote.
      if (kabi::pm_is_marker(e)) continue;
      bool take = sel == PageSelect::kPopulated
                      ? (e & (kPmPresent | kPmSwapped)) != 0
                      : (e & kPmSwapped) != 0 || ((e & kPmPresent) && !(e & kPmFileOrShared));
      if (!take) continue;
      if (out.size() == first)
        out.push_back(Range{addr + i * ps, ps});
      else
        append_range(out, addr + i * ps, ps);
    }
    addr += n * ps;
  }
  return {};
}

}  // namespace ckpt::mem
