// cr_pause: roll a live process back to its newest checkpoint in place.
//
//   1. Open the chain and verify every page run the rollback may need,
//      before the process is touched.
//   2. Freeze it; find the pages that may differ from the checkpoint: with a
//      pagemap-scan chain, exactly those written since (the tracker's dirty
//      set); otherwise every saved page, read back and compared.
//   3. Through injected system calls (a trampoline as restore uses): unmap
//      mappings the checkpoint did not have, map those it had that are
//      missing or different (restore/address_space), rewrite differing pages
//      (/proc/PID/mem), drop pages populated since, set the mm fields,
//      signal dispositions, mask and files.
//   4. Load the checkpoint's registers at the exit of the last injected call
//      and let the process go.
#include <fcntl.h>
#include <linux/prctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <ckpt/pause.hpp>
#include <cstring>
#include <set>

#include "dirty/layout.hpp"
#include "dirty/pagemap_scan.hpp"
#include "dirty/tracker.hpp"
#include "dump/collect.hpp"
#include "image/chain.hpp"
#include "image/store.hpp"
#include "mem/pagemap.hpp"
#include "proc/freeze.hpp"
#include "proc/inject.hpp"
#include "proc/maps.hpp"
#include "proc/regs.hpp"
#include "restore/address_space.hpp"
#include "restore/syscall_restart.hpp"
#include "util/clock.hpp"
#include "util/zeros.hpp"

namespace ckpt {

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

std::string readlink_str(const std::string& path) {
  char buf[4096];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n < 0 ? std::string() : std::string(buf, size_t(n));
}

// Ranges of `a` that intersect [s, e).
void clip(const std::vector<Range>& a, uint64_t s, uint64_t e, std::vector<Range>* out) {
  auto it = std::upper_bound(a.begin(), a.end(), s,
                             [](uint64_t v, const Range& r) { return v < r.end(); });
  for (; it != a.end() && it->addr < e; ++it) {
    uint64_t x = std::max(s, it->addr), y = std::min(e, it->end());
    if (x < y) out->push_back({x, y - x});
  }
}

class InPlace {
 public:
  InPlace(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan, PauseStats* st)
      : pid_(pid), chain_(chain), meta_(chain.newest()), plan_(plan), st_(st) {}

  Status run(proc::FrozenProcess& fp, const std::vector<Range>* candidates) {
    CKPT_ASSIGN(user_regs_struct base, proc::get_regs(pid_));
    CKPT_ASSIGN(uint64_t insn, proc::find_syscall_insn(pid_));
    proc::RemoteSyscall rs(pid_, base, insn);
    restore::AddressSpaceBuilder b(pid_, chain_, plan_, rs);
    CKPT_TRY(b.map_trampoline(true));
    mem_.reset(::open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDWR | O_CLOEXEC));
    if (!mem_.valid()) return sys_error("opening the memory of PID " + std::to_string(pid_));
    CKPT_TRY(fix_layout(b));
    CKPT_TRY(write_memory(candidates));
    CKPT_TRY(drop_new_pages(b, candidates));
    CKPT_TRY(b.restore_protections());
    CKPT_TRY(set_mm(b));
    CKPT_TRY(set_signals(b));
    CKPT_TRY(set_files(b));
    const image::ThreadRecord& t = meta_.threads[0];
    CKPT_TRY(proc::set_xstate(pid_, t.xstate));
    uint64_t mask = t.sigmask;
    if (::ptrace(PTRACE_SETSIGMASK, pid_, sizeof mask, &mask) != 0)
      return sys_error("setting the signal mask");
    user_regs_struct captured;
    std::memcpy(&captured, t.gpregs.data(), sizeof captured);
    CKPT_ASSIGN(long ret,
                rs.call_and_load(restore::resume_registers(captured), SYS_munmap, b.trampoline(),
                                 restore::AddressSpaceBuilder::kTrampolineLen));
    if (ret != 0) return sys_error("removing the trampoline", int(-ret));
    return fp.release();
  }

 private:
  Status fix_layout(restore::AddressSpaceBuilder& b) {
    CKPT_ASSIGN(auto maps, proc::read_maps(pid_));
    CKPT_ASSIGN(cur_, dump::collect_vmas(pid_, maps));
    keep_.assign(meta_.vmas.size(), false);
    for (const VmaRecord& c : cur_) {
      if (c.is_special() || c.start == b.trampoline()) continue;
      auto it = std::find_if(meta_.vmas.begin(), meta_.vmas.end(),
                             [&](const VmaRecord& v) { return same_mapping(v, c); });
      if (it != meta_.vmas.end()) {
        keep_[size_t(it - meta_.vmas.begin())] = true;
        ++st_->vmas_kept;
        continue;
      }
      CKPT_TRY(
          b.sys("unmapping a mapping made after the checkpoint", SYS_munmap, c.start, c.size()));
      ++st_->vmas_unmapped;
    }
    std::vector<bool> missing(keep_.size());
    for (size_t i = 0; i < keep_.size(); ++i) {
      missing[i] = !keep_[i] && !meta_.vmas[i].is_special();
      if (meta_.vmas[i].is_special() &&
          std::none_of(cur_.begin(), cur_.end(), [&](const VmaRecord& c) {
            return c.start == meta_.vmas[i].start && c.end == meta_.vmas[i].end;
          }))
        return make_error(ENOTSUP, "the vdso moved since the checkpoint");
      st_->vmas_mapped += missing[i];
    }
    b.map_only(missing);
    return b.map_vmas();
  }

  // Rewrites the pages of new mappings, and the pages of kept mappings that
  // may differ and do.
  Status write_memory(const std::vector<Range>* candidates) {
    const auto& vmas = meta_.vmas;
    std::vector<uint8_t> cur;
    size_t vi = 0;
    std::vector<Range> pieces;
    for (const image::PlanSlice& sl : plan_.slices) {
      while (vmas[vi].end <= sl.vaddr) ++vi;
      const uint64_t a = sl.vaddr, e = a + uint64_t(sl.npages) * kPageSize;
      const uint8_t* img =
          sl.zero() ? nullptr
                    : chain_.links[sl.link]->content(*sl.run) + uint64_t(sl.first_page) * kPageSize;
      if (!keep_[vi]) {  // freshly mapped: zero already unless a file page
        if (img || vmas[vi].is_file())
          for (uint64_t p = a; p < e; p += kPageSize)
            CKPT_TRY(put_page(p, img ? img + (p - a) : nullptr));
        continue;
      }
      pieces.clear();
      if (candidates)
        clip(*candidates, a, e, &pieces);
      else
        pieces.push_back({a, e - a});
      for (const Range& r : pieces) {
        cur.resize(r.len);
        if (::pread(mem_.get(), cur.data(), r.len, off_t(r.addr)) != ssize_t(r.len))
          return sys_error("reading the process's memory at " + std::to_string(r.addr));
        for (uint64_t off = 0; off < r.len; off += kPageSize) {
          const uint8_t* want = img ? img + (r.addr - a) + off : zero_bytes();
          ++st_->pages_compared;
          if (std::memcmp(cur.data() + off, want, kPageSize) != 0)
            CKPT_TRY(put_page(r.addr + off, img ? want : nullptr));
        }
      }
    }
    return {};
  }

  Status put_page(uint64_t addr, const uint8_t* data) {
    if (::pwrite(mem_.get(), data ? data : zero_bytes(), kPageSize, off_t(addr)) !=
        ssize_t(kPageSize))
      return sys_error("writing the process's memory");
    ++st_->pages_written;
    return {};
  }

  // Pages of kept mappings populated now that the checkpoint did not hold
  // (no slice of the plan): back to freshly mapped.
  Status drop_new_pages(restore::AddressSpaceBuilder& b, const std::vector<Range>* candidates) {
    std::vector<Range> covered;
    for (const image::PlanSlice& sl : plan_.slices)
      covered.push_back({sl.vaddr, uint64_t(sl.npages) * kPageSize});
    dirty::normalize(covered);
    CKPT_ASSIGN(mem::Pagemap pm, mem::Pagemap::open(pid_));
    for (size_t i = 0; i < meta_.vmas.size(); ++i) {
      const VmaRecord& v = meta_.vmas[i];
      if (!keep_[i] || v.is_special() || (v.is_file() && (v.flags & image::kVmaShared))) continue;
      std::vector<Range> scope;
      if (candidates)
        clip(*candidates, v.start, v.end, &scope);
      else
        scope.push_back({v.start, v.size()});
      std::vector<Range> populated;
      for (const Range& r : scope)
        CKPT_TRY(
            pm.select(r.addr, r.end(),
                      v.is_file() ? mem::PageSelect::kPrivateCopies : mem::PageSelect::kPopulated,
                      populated));
      dirty::normalize(populated);
      for (const Range& r : dirty::subtract(populated, covered)) {
        CKPT_TRY(b.sys("dropping pages populated since the checkpoint", SYS_madvise, r.addr, r.len,
                       MADV_DONTNEED));
        st_->pages_dropped += r.len / kPageSize;
      }
    }
    return {};
  }

  Status set_mm(restore::AddressSpaceBuilder& b) {
    const image::MmRecord& mm = meta_.mm;
    prctl_mm_map map{};
    map.start_code = mm.start_code;
    map.end_code = mm.end_code;
    map.start_data = mm.start_data;
    map.end_data = mm.end_data;
    map.start_brk = mm.start_brk;
    map.brk = mm.brk;
    map.start_stack = mm.start_stack;
    map.arg_start = mm.arg_start;
    map.arg_end = mm.arg_end;
    map.env_start = mm.env_start;
    map.env_end = mm.env_end;
    map.exe_fd = uint32_t(-1);  // the same executable: left as it is
    size_t auxv_bytes = std::min<size_t>(mm.auxv.size() * 8, kPageSize - sizeof map);
    if (auxv_bytes) {
      CKPT_ASSIGN(uint64_t auxv_addr, b.put_data(mm.auxv.data(), auxv_bytes, sizeof map));
      map.auxv = reinterpret_cast<__u64*>(auxv_addr);
      map.auxv_size = uint32_t(auxv_bytes);
    }
    CKPT_ASSIGN(uint64_t addr, b.put_data(&map, sizeof map));
    CKPT_TRY(b.sys("setting the mm fields (PR_SET_MM_MAP)", SYS_prctl, PR_SET_MM, PR_SET_MM_MAP,
                   addr, sizeof map));
    return {};
  }

  Status set_signals(restore::AddressSpaceBuilder& b) {
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
      CKPT_ASSIGN(uint64_t addr, b.put_data(ksa, sizeof ksa));
      CKPT_TRY(b.sys("restoring a signal action", SYS_rt_sigaction, uint64_t(s), addr, 0, 8));
    }
    return {};
  }

  // Files: the checkpoint's fds at their offsets (reopened when the fd now
  // holds something else), and fds opened since closed. Terminals and pipes
  // on 0-2 are left as they are; file contents are not rolled back.
  Status set_files(restore::AddressSpaceBuilder& b) {
    const std::string fddir = "/proc/" + std::to_string(pid_) + "/fd";
    std::set<int> wanted;
    const int tracker_fd = meta_.tracker_fd >= 0 ? meta_.tracker_fd : dirty::kTrackerFd;
    for (const image::FileRecord& f : meta_.files) {
      wanted.insert(f.fd);
      if (f.kind == image::FileKind::kInheritStdio) continue;
      if (readlink_str(fddir + "/" + std::to_string(f.fd)) != f.path) {
        CKPT_ASSIGN(uint64_t path, b.put_data(f.path.c_str(), f.path.size() + 1));
        int flags = int(f.flags) & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY);
        CKPT_ASSIGN(long nfd, b.sys(("reopening " + f.path).c_str(), SYS_openat, uint64_t(AT_FDCWD),
                                    path, uint64_t(flags | O_CLOEXEC)));
        if (nfd != f.fd) {
          CKPT_TRY(b.sys("placing a reopened file", SYS_dup3, uint64_t(nfd), uint64_t(f.fd),
                         (f.fd_flags & FD_CLOEXEC) ? O_CLOEXEC : 0));
          (void)b.sys("closing", SYS_close, uint64_t(nfd));
        } else if (!(f.fd_flags & FD_CLOEXEC)) {
          CKPT_TRY(b.sys("fd flags", SYS_fcntl, uint64_t(f.fd), F_SETFD, 0));
        }
        ++st_->files_reopened;
      }
      if (f.kind == image::FileKind::kRegular) {
        auto r =
            b.sys(("seeking " + f.path).c_str(), SYS_lseek, uint64_t(f.fd), f.offset, SEEK_SET);
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
      CKPT_TRY(b.sys("closing a file opened after the checkpoint", SYS_close, uint64_t(fd)));
      ++st_->files_closed;
    }
    return {};
  }

  pid_t pid_;
  const image::Chain& chain_;
  const image::ImageMeta& meta_;
  const image::RestorePlan& plan_;
  PauseStats* st_;
  UniqueFd mem_;
  std::vector<VmaRecord> cur_;
  std::vector<bool> keep_;
};

}  // namespace

Result<PauseStats> pause_process(const PauseOptions& opts) {
  const double t0 = now_seconds();
  PauseStats st;
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts.dir));
  if (gens.empty()) return make_error(ENOENT, "no checkpoint in " + opts.dir);
  CKPT_ASSIGN(image::Chain chain, image::open_chain(opts.dir, gens.back()));
  const image::ImageMeta& meta = chain.newest();
  st.generation = meta.generation;
  if (meta.process.pid != opts.pid)
    return make_error(EINVAL, opts.dir + " holds checkpoints of PID " +
                                  std::to_string(meta.process.pid) + ", not of " +
                                  std::to_string(opts.pid));
  std::string exe = readlink_str("/proc/" + std::to_string(opts.pid) + "/exe");
  if (exe.empty()) return make_error(ESRCH, "no process " + std::to_string(opts.pid));
  if (exe != meta.mm.exe_path)
    return make_error(EINVAL, "PID " + std::to_string(opts.pid) + " runs " + exe +
                                  ", the checkpoint is of " + meta.mm.exe_path);
  if (meta.threads.size() != 1)
    return make_error(ENOTSUP, "the checkpoint has " + std::to_string(meta.threads.size()) +
                                   " threads: in-place rollback is single-threaded so far");
  const image::RestorePlan plan = image::plan_chain(chain);
  // Nothing unverified may reach the process.
  std::set<const image::PageRun*> checked;
  for (const image::PlanSlice& sl : plan.slices)
    if (!sl.zero() && checked.insert(sl.run).second)
      CKPT_TRY(chain.links[sl.link]->verify_run(*sl.run));

  const double tf = now_seconds();
  CKPT_ASSIGN(std::unique_ptr<proc::FrozenProcess> fp, proc::FrozenProcess::freeze(opts.pid));
  if (fp->threads().size() != 1)
    return make_error(ENOTSUP, "PID " + std::to_string(opts.pid) + " has " +
                                   std::to_string(fp->threads().size()) +
                                   " threads now, the checkpoint one: not rolled back");
  // The pages that may differ: the tracker's dirty set, when the chain has one.
  std::vector<Range> candidates;
  bool tracked = false;
  if (auto tracker = dirty::make_tracker(meta.tracker)) {
    CKPT_ASSIGN(auto maps, proc::read_maps(opts.pid));
    auto cur = dump::collect_vmas(opts.pid, maps);
    dirty::TrackerState ts;
    ts.target_fd = meta.tracker_fd;
    if (cur.ok() && ts.target_fd >= 0) {
      auto ds = tracker->collect(opts.pid, *cur, meta.vmas, &ts);
      if (ds.ok() && !ds->everything) {
        candidates = ds->written;
        candidates.insert(candidates.end(), ds->unknown.begin(), ds->unknown.end());
        dirty::normalize(candidates);
        tracked = true;
      }
    }
  }
  st.method = tracked ? "tracker" : "compare";

  InPlace ip(opts.pid, chain, plan, &st);
  Status s = ip.run(*fp, tracked ? &candidates : nullptr);
  if (!s.ok()) {
    (void)fp->kill();
    return s.error().context("rollback failed midway, PID " + std::to_string(opts.pid) +
                             " was killed rather than left half rolled back");
  }
  st.frozen_seconds = now_seconds() - tf;
  st.seconds = now_seconds() - t0;
  return st;
}

}  // namespace ckpt
