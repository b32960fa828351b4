#include "restore/in_place.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/prctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "dirty/layout.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dump/collect.hpp"
#include "mem/pagemap.hpp"
#include "proc/maps.hpp"
#include "proc/regs.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"
#include "util/zeros.hpp"

namespace ckpt::restore {

namespace {

using image::kPageSize;
using image::VmaRecord;
using mem::Range;

bool same_mapping(const VmaRecord& a, const VmaRecord& b) {
  constexpr uint32_t kCompared = image::kVmaShared | image::kVmaFile | image::kVmaGrowsDown;
  return a.start == b.start && a.end == b.end && a.prot == b.prot &&
         (a.flags & kCompared) == (b.flags & kCompared) && a.name == b.name &&
         (!a.is_file() || a.pgoff == b.pgoff);
}

// The parts of `a` (sorted, merged) inside [s, e).
void clip(const std::vector<Range>& a, uint64_t s, uint64_t e, std::vector<Range>* out) {
  auto it = std::upper_bound(a.begin(), a.end(), s,
                             [](uint64_t v, const Range& r) { return v < r.end(); });
  for (; it != a.end() && it->addr < e; ++it) {
    uint64_t x = std::max(s, it->addr), y = std::min(e, it->end());
    if (x < y) out->push_back({x, y - x});
  }
}

}  // namespace

InPlace::InPlace(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan,
                 InPlaceStats* st)
    : pid_(pid), chain_(chain), meta_(chain.newest()), plan_(plan), st_(st) {}

InPlace::~InPlace() = default;

Status InPlace::begin() {
  CKPT_ASSIGN(base_, proc::get_regs(pid_));
  CKPT_ASSIGN(uint64_t insn, proc::find_syscall_insn(pid_));
  rs_ = std::make_unique<proc::RemoteSyscall>(pid_, base_, insn);
  b_ = std::make_unique<restore::AddressSpaceBuilder>(pid_, chain_, plan_, *rs_);
  CKPT_TRY(b_->map_trampoline(true));
  mem_.reset(::open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDWR | O_CLOEXEC));
  if (!mem_.valid()) return sys_error("opening the memory of PID " + std::to_string(pid_));
  return {};
}

Status InPlace::end(const user_regs_struct* final_regs) {
  CKPT_ASSIGN(long ret,
              rs_->call_and_load(final_regs ? *final_regs : base_, SYS_munmap, b_->trampoline(),
                                 restore::AddressSpaceBuilder::kTrampolineLen));
  if (ret != 0) return sys_error("removing the trampoline", int(-ret));
  return {};
}

Status InPlace::fix_layout() {
  CKPT_ASSIGN(auto maps, proc::read_maps(pid_));
  CKPT_ASSIGN(std::vector<VmaRecord> cur, dump::collect_vmas(pid_, maps));
  keep_.assign(meta_.vmas.size(), false);
  for (const VmaRecord& c : cur) {
    if (c.is_special() || c.start == b_->trampoline()) continue;
    auto it = std::find_if(meta_.vmas.begin(), meta_.vmas.end(),
                           [&](const VmaRecord& v) { return same_mapping(v, c); });
    if (it != meta_.vmas.end()) {
      keep_[size_t(it - meta_.vmas.begin())] = true;
      ++st_->vmas_kept;
      continue;
    }
    CKPT_TRY(
        b_->sys("unmapping a mapping the checkpoint does not have", SYS_munmap, c.start, c.size()));
    ++st_->vmas_unmapped;
  }
  std::vector<bool> missing(keep_.size());
  for (size_t i = 0; i < keep_.size(); ++i) {
    const VmaRecord& v = meta_.vmas[i];
    if (v.is_special()) {
      if (std::none_of(cur.begin(), cur.end(), [&](const VmaRecord& c) {
            return c.name == v.name && c.start == v.start && c.end == v.end;
          }))
        return make_error(ENOTSUP, v.name + " is not where the checkpoint has it");
      continue;
    }
    missing[i] = !keep_[i];
    st_->vmas_mapped += missing[i];
  }
  b_->map_only(missing);
  CKPT_TRY(b_->map_vmas());
  return b_->restore_protections();
}

Status InPlace::write_memory(const std::vector<Range>* candidates, bool compare) {
  const auto& vmas = meta_.vmas;
  std::vector<uint8_t> cur;
  std::vector<Range> pieces;
  size_t vi = 0;
  // Writes are gathered and made with process_vm_writev, up to 1024 pieces
  // a call (scattered dirty pages would otherwise cost a call each); what it
  // cannot write (read-only mappings) goes through /proc/PID/mem.
  std::vector<iovec> local, remote;
  auto flush = [&]() -> Status {
    if (local.empty()) return {};
    ssize_t want = 0;
    for (const iovec& v : local) want += ssize_t(v.iov_len);
    ssize_t n =
        ::process_vm_writev(pid_, local.data(), local.size(), remote.data(), remote.size(), 0);
    if (n != want) {
      for (size_t i = 0; i < local.size(); ++i) {
        const uint64_t at = reinterpret_cast<uint64_t>(remote[i].iov_base);
        if (::pwrite(mem_.get(), local[i].iov_base, local[i].iov_len, off_t(at)) !=
            ssize_t(local[i].iov_len))
          return sys_error("writing memory at " + hex(at));
      }
    }
    local.clear();
    remote.clear();
    return {};
  };
  auto put = [&](uint64_t addr, const uint8_t* data, uint64_t len) -> Status {
    for (uint64_t off = 0; off < len;) {
      uint64_t k = data ? len - off : std::min<uint64_t>(kZeroBytes, len - off);
      local.push_back({const_cast<uint8_t*>(data ? data + off : zero_bytes()), k});
      remote.push_back({reinterpret_cast<void*>(addr + off), k});
      off += k;
      if (local.size() == 1024) CKPT_TRY(flush());
    }
    st_->pages_written += len / kPageSize;
    return {};
  };
  for (const image::PlanSlice& sl : plan_.slices) {
    while (vmas[vi].end <= sl.vaddr) ++vi;
    const uint64_t a = sl.vaddr, e = a + uint64_t(sl.npages) * kPageSize;
    const uint8_t* img =
        sl.zero() ? nullptr
                  : chain_.links[sl.link]->content(*sl.run) + uint64_t(sl.first_page) * kPageSize;
    if (!keep_[vi]) {  // freshly mapped: already zero unless it maps a file
      if (img || vmas[vi].is_file()) CKPT_TRY(put(a, img, e - a));
      continue;
    }
    pieces.clear();
    if (candidates)
      clip(*candidates, a, e, &pieces);
    else
      pieces.push_back({a, e - a});
    for (const Range& r : pieces) {
      const uint8_t* want = img ? img + (r.addr - a) : nullptr;
      if (!compare) {
        CKPT_TRY(put(r.addr, want, r.len));
        continue;
      }
      cur.resize(r.len);
      if (::pread(mem_.get(), cur.data(), r.len, off_t(r.addr)) != ssize_t(r.len))
        return sys_error("reading memory at " + hex(r.addr));
      uint64_t run_at = 0, run_len = 0;  // differing pages, written in stretches
      for (uint64_t off = 0; off <= r.len; off += kPageSize) {
        bool differs = false;
        if (off < r.len) {
          ++st_->pages_compared;
          differs = std::memcmp(cur.data() + off, want ? want + off : zero_bytes(), kPageSize) != 0;
        }
        if (differs) {
          if (!run_len) run_at = off;
          run_len += kPageSize;
        } else if (run_len) {
          CKPT_TRY(put(r.addr + run_at, want ? want + run_at : nullptr, run_len));
          run_len = 0;
        }
      }
    }
  }
  return flush();
}

Status InPlace::drop_new_pages(const std::vector<Range>* candidates) {
  std::vector<Range> covered;
  for (const image::PlanSlice& sl : plan_.slices)
    covered.push_back({sl.vaddr, uint64_t(sl.npages) * kPageSize});
  dirty::normalize(covered);
  CKPT_ASSIGN(mem::Pagemap pm, mem::Pagemap::open(pid_));
  for (size_t i = 0; i < meta_.vmas.size(); ++i) {
    const VmaRecord& v = meta_.vmas[i];
    if (!keep_[i] || v.is_special() || (v.is_file() && (v.flags & image::kVmaShared))) continue;
    std::vector<Range> scope, populated;
    if (candidates)
      clip(*candidates, v.start, v.end, &scope);
    else
      scope.push_back({v.start, v.size()});
    for (const Range& r : scope)
      CKPT_TRY(pm.select(
          r.addr, r.end(),
          v.is_file() ? mem::PageSelect::kPrivateCopies : mem::PageSelect::kPopulated, populated));
    dirty::normalize(populated);
    for (const Range& r : dirty::subtract(populated, covered)) {
      CKPT_TRY(b_->sys("dropping pages populated since the checkpoint", SYS_madvise, r.addr, r.len,
                       MADV_DONTNEED));
      st_->pages_dropped += r.len / kPageSize;
    }
  }
  return {};
}

Status InPlace::set_mm() {
  return b_->set_mm_map(uint32_t(-1));  // the same executable: left as it is
}

Status InPlace::set_signals() {
  for (int s = 1; s <= 64; ++s) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    uint64_t ksa[4] = {0, 0, 0, 0};  // SIG_DFL
    for (const image::SignalAction& a : meta_.process.sigactions)
      if (int(a.signo) == s) {
        ksa[0] = a.handler;
        ksa[1] = a.flags;
        ksa[2] = a.restorer;
        ksa[3] = a.mask;
      }
    CKPT_ASSIGN(uint64_t addr, b_->put_data(ksa, sizeof ksa));
    CKPT_TRY(b_->sys("restoring a signal action", SYS_rt_sigaction, uint64_t(s), addr, 0, 8));
  }
  return {};
}

// The generation's fds at their offsets (reopened when the fd now holds
// something else); fds it does not have are closed. Terminals and pipes on
// 0-2 are left as they are; file contents are not rolled back.
Status InPlace::set_files() {
  const std::string fddir = "/proc/" + std::to_string(pid_) + "/fd";
  std::set<int> wanted;
  const int tracker_fd = meta_.tracker_fd >= 0 ? meta_.tracker_fd : dirty::kTrackerFd;
  for (const image::FileRecord& f : meta_.files) {
    wanted.insert(f.fd);
    if (f.kind == image::FileKind::kInheritStdio) continue;
    if (read_link_or_empty(fddir + "/" + std::to_string(f.fd)) != f.path) {
      CKPT_ASSIGN(uint64_t path, b_->put_data(f.path.c_str(), f.path.size() + 1));
      int flags = int(f.flags) & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
      CKPT_ASSIGN(long nfd, b_->sys(("reopening " + f.path).c_str(), SYS_openat, uint64_t(AT_FDCWD),
                                    path, uint64_t(flags | O_CLOEXEC)));
      if (nfd != f.fd) {
        CKPT_TRY(b_->sys("placing a reopened file", SYS_dup3, uint64_t(nfd), uint64_t(f.fd),
                         (f.fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0));
        (void)b_->sys("closing", SYS_close, uint64_t(nfd));
      } else if (!(f.fd_flags & FD_CLOEXEC)) {
        CKPT_TRY(b_->sys("setting fd flags", SYS_fcntl, uint64_t(f.fd), F_SETFD, 0));
      }
      ++st_->files_reopened;
    }
    if (f.kind == image::FileKind::kRegular) {
      auto r =
          b_->sys(("seeking " + f.path).c_str(), SYS_lseek, uint64_t(f.fd), f.offset, SEEK_SET);
      if (!r.ok() && r.error().code != ESPIPE) return r.error();
    }
  }
  std::vector<int> extra;
  if (DIR* d = ::opendir(fddir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      int fd = std::atoi(e->d_name);
      if (!wanted.count(fd) && fd != tracker_fd) extra.push_back(fd);
    }
    ::closedir(d);
  }
  for (int fd : extra) {
    CKPT_TRY(b_->sys("closing a file the checkpoint does not have", SYS_close, uint64_t(fd)));
    ++st_->files_closed;
  }
  return {};
}

}  // namespace ckpt::restore
