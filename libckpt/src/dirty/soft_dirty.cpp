#include "dirty/soft_dirty.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "dirty/layout.hpp"
#include "dirty/ledger.hpp"
#include "mem/kernel_abi.hpp"
#include "util/fd.hpp"

namespace ckpt::dirty {

namespace {

constexpr size_t kBatch = 64 * 1024;  // pagemap entries per read (256 MiB of memory)

Status clear_refs(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/clear_refs";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return sys_error("opening " + path);
  if (::write(fd.get(), "4", 1) != 1)
    return sys_error("clearing soft-dirty bits of " + std::to_string(pid));
  return {};
}

// Adds [addr, addr + len) to `out`, merging with the last range.
void add(std::vector<Range>& out, uint64_t addr, uint64_t len) {
  mem::append_range(out, addr, len);
}

}  // namespace

FeatureCheck SoftDirtyTracker::probe() {
  FeatureCheck c{"soft-dirty", false, ""};
  void* p = ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return c.detail = "mmap failed", c;
  static_cast<volatile char*>(p)[0] = 1;  // present before the clear
  Status st = clear_refs(::getpid());
  uint64_t before = 0, after = 0;
  UniqueFd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  off_t off = off_t(reinterpret_cast<uint64_t>(p) / kPage * 8);
  bool ok = st.ok() && pm.valid() && ::pread(pm.get(), &before, 8, off) == 8;
  static_cast<volatile char*>(p)[0] = 2;
  ok = ok && ::pread(pm.get(), &after, 8, off) == 8;
  ::munmap(p, kPage);
  if (!st.ok()) return c.detail = "clear_refs 4 refused: kernel without CONFIG_MEM_SOFT_DIRTY", c;
  if (!ok) return c.detail = "cannot read /proc/self/pagemap", c;
  if (before & kabi::kPmSoftDirty)
    return c.detail =
               "soft-dirty bit not cleared by clear_refs 4 (kernel without CONFIG_MEM_SOFT_DIRTY)",
           c;
  if (!(after & kabi::kPmSoftDirty))
    return c.detail = "no soft-dirty bit on written pages (kernel without CONFIG_MEM_SOFT_DIRTY)",
           c;
  c.ok = true;
  c.detail = "clear_refs 4 and pagemap bit 55 work";
  return c;
}

// The soft-dirty bits are the process's, reset by whoever clears them: the
// ledger (dirty/ledger.hpp) names the generation of the last reset, written
// before it.
Status SoftDirtyTracker::arm(pid_t pid, const std::vector<image::VmaRecord>&, TrackerState* state) {
  state->target_fd = -1;  // nothing is kept in the target
  record_arm(pid, *state);
  return clear_refs(pid);
}

Result<DirtySet> SoftDirtyTracker::collect(pid_t pid, const std::vector<image::VmaRecord>& vmas,
                                           const std::vector<image::VmaRecord>& prev,
                                           TrackerState* state) {
  DirtySet out;
  CKPT_ASSIGN(std::string untrusted, begin_collect(pid, *state));
  if (!untrusted.empty()) {
    out.everything = true;
    out.reason = untrusted;
    CKPT_TRY(arm(pid, vmas, state));
    return out;
  }
  std::string path = "/proc/" + std::to_string(pid) + "/pagemap";
  UniqueFd pm(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!pm.valid()) return sys_error("opening " + path);
  std::vector<uint64_t> buf(kBatch);
  for (const image::VmaRecord& v : vmas) {
    Kind kind = classify(v);
    if (kind == Kind::kSkip) continue;
    if (kind == Kind::kUnknown) {
      out.unknown.push_back({v.start, v.size()});
      continue;
    }
    for (const Range& r : uncovered(v, prev)) out.unknown.push_back(r);
    for (uint64_t addr = v.start; addr < v.end;) {
      size_t n = std::min<uint64_t>(kBatch, (v.end - addr) / kPage);
      CKPT_TRY(read_exact(pm.get(), buf.data(), n * 8, off_t(addr / kPage * 8), "pagemap"));
      for (size_t i = 0; i < n; ++i) {
        uint64_t e = buf[i];
        bool empty = !(e & (kabi::kPmPresent | kabi::kPmSwapped));
        // A private file mapping's page that is the file's page (not a COW
        // copy) may have been a COW copy at the previous checkpoint, dropped
        // by MADV_DONTNEED and read back in: no soft-dirty bit, yet its
        // content changed. Reported: the checkpoint records it as the file's.
        bool file_page =
            kind == Kind::kFile && (e & kabi::kPmPresent) && (e & kabi::kPmFileOrShared);
        if ((e & kabi::kPmSoftDirty) || empty || file_page)
          add(out.written, addr + i * kPage, kPage);
      }
      addr += n * kPage;
    }
  }
  normalize(out.unknown);
  CKPT_TRY(arm(pid, vmas, state));  // tracking restarts from this instant
  return out;
}

}  // namespace ckpt::dirty
