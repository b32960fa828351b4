#include "dirty/pagemap_scan.hpp"

#include "dirty/layout.hpp"
#include "util/text.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "dirty/changed_pages.hpp"
#include "dirty/huge_blocks.hpp"
#include "dirty/ledger.hpp"
#include "dirty/self_test_record.hpp"
#include "mem/madvise.hpp"
#include "mem/reader.hpp"
#include "proc/fd_links.hpp"
#include "proc/inject.hpp"
#include "proc/maps.hpp"
#include "proc/regs.hpp"
#include "proc/syscall_restart.hpp"
#include "util/fd.hpp"
#include "util/hash.hpp"
#include "util/zeros.hpp"

namespace ckpt::dirty {

using image::VmaRecord;
using mem::Range;

namespace {

constexpr uint64_t kFeatures = kabi::kUffdFeatureWpAsync | kabi::kUffdFeatureWpUnpopulated;

// One PAGEMAP_SCAN selection. `protect`: write-protect what matched
// (PM_SCAN_WP_MATCHING). Every scan sets PM_SCAN_CHECK_WPASYNC, so a range
// not registered with an async write-protect userfaultfd fails with EPERM.
struct Query {
  uint64_t inverted, mask, anyof;
  bool protect;
};
// Written pages. Exactly this mask/return mask takes the kernel's fast path.
constexpr Query kWritten{0, kabi::kPageIsWritten, 0, true};
// Written pages that are not PMD-mapped huge pages: those are left
// unprotected (dirty/huge_blocks). Measured as fast as kWritten here.
constexpr Query kWrittenSmall{kabi::kPageIsHuge, kabi::kPageIsWritten | kabi::kPageIsHuge, 0, true};
// Unprotected PMD-mapped huge pages, and all of them, left as they are.
constexpr Query kHugeUnprotected{0, kabi::kPageIsWritten | kabi::kPageIsHuge, 0, false};
constexpr Query kHugeMapped{0, kabi::kPageIsHuge, 0, false};
// Populated pages (in memory or swapped out), left as they are.
constexpr Query kPopulated{0, 0, kabi::kPageIsPresent | kabi::kPageIsSwapped, false};
// Pages in memory: how dense a block is (a protected empty entry, a PTE
// marker, counts as swapped: a re-armed sparse range would look full).
constexpr Query kPresent{0, kabi::kPageIsPresent, 0, false};
// Populated pages that read as written, left as they are (an estimate of
// what the next collect reports).
constexpr Query kWrittenPresent{0, kabi::kPageIsWritten | kabi::kPageIsPresent, 0, false};
// The same, leaving them unprotected (blocks kept hot: dirty/adaptive).
constexpr Query kWrittenKeep{0, kabi::kPageIsWritten, 0, false};
// File VMAs: written page-cache pages ...
constexpr Query kWrittenFilePages{0, kabi::kPageIsWritten | kabi::kPageIsFile, 0, true};
// ... and empty entries (never faulted in, or a private copy dropped) ...
constexpr Query kEmptyEntries{kabi::kPageIsPresent | kabi::kPageIsSwapped,
                              kabi::kPageIsWritten | kabi::kPageIsPresent | kabi::kPageIsSwapped, 0,
                              true};
// ... but private (COW) copies are reported, never protected (see the header).
constexpr Query kPrivateCopies{kabi::kPageIsFile, kabi::kPageIsWritten | kabi::kPageIsFile,
                               kabi::kPageIsPresent | kabi::kPageIsSwapped, false};

// The kernel VMAs (pieces of them) inside `v`. One PAGEMAP_SCAN never spans
// two VMAs: when a later VMA of the range is not registered, the kernel has
// already re-protected the earlier ones when it fails with EPERM, and their
// written pages would be lost.
std::vector<Range> kernel_pieces(const std::vector<proc::MapEntry>& maps, const VmaRecord& v) {
  std::vector<Range> out;
  auto it = std::lower_bound(maps.begin(), maps.end(), v.start,
                             [](const proc::MapEntry& m, uint64_t a) { return m.end <= a; });
  for (; it != maps.end() && it->start < v.end; ++it) {
    uint64_t s = std::max(it->start, v.start), e = std::min(it->end, v.end);
    if (s < e) out.push_back(Range{s, e - s});
  }
  return out;
}

class Scanner {
 public:
  // `keep_huge`: protecting anonymous memory leaves PMD-mapped huge pages
  // unprotected (dirty/huge_blocks.hpp).
  Scanner(int pagemap, std::vector<kabi::page_region>& buf, bool keep_huge = false)
      : fd_(pagemap), buf_(buf), keep_huge_(keep_huge) {}

  // Protects the written pages of private anonymous memory in [start,
  // end), appending them to `out`. Keeping huge pages, what reads as written
  // is listed first, huge or not, and only then are the small pages
  // protected: a huge page split or small pages collapsed into one (by
  // khugepaged, which runs while the target is stopped) between two scans
  // that each looked at one kind would be seen by neither.
  int protect_anon(uint64_t start, uint64_t end, std::vector<Range>* out) {
    if (!keep_huge_) return scan(start, end, kWritten, out);
    if (out)
      if (int e = scan(start, end, kWrittenKeep, out)) return e;
    return scan(start, end, kWrittenSmall, out);
  }

  // Appends the pages of [start, end) matching `q`; 0 or a negative errno
  // (-EPERM: not registered with an async write-protect userfaultfd). After
  // a failure part of the range may already be re-protected: callers then
  // report all of it.
  int scan(uint64_t start, uint64_t end, const Query& q, std::vector<Range>* out) {
    uint64_t pos = start;
    while (pos < end) {
      kabi::pm_scan_arg a{};
      a.size = sizeof a;
      a.flags = kabi::kScanCheckWpAsync | (q.protect ? kabi::kScanWpMatching : 0);
      a.start = pos;
      a.end = end;
      a.vec = reinterpret_cast<uint64_t>(buf_.data());
      a.vec_len = buf_.size();
      a.category_inverted = q.inverted;
      a.category_mask = q.mask;
      a.category_anyof_mask = q.anyof;
      a.return_mask = kabi::kPageIsWritten;
      long n = ::ioctl(fd_, kabi::kPagemapScan, &a);
      if (n < 0) return -errno;
      for (long i = 0; i < n && out; ++i)
        mem::append_range(*out, buf_[i].start, buf_[i].end - buf_[i].start);
      // The walk_end quirk: past 512 regions walk_end may stop short of where
      // the walk got to. A buffer that did not fill means the walk finished;
      // otherwise resume after both walk_end and the last region returned.
      if (size_t(n) < buf_.size()) break;
      uint64_t next = std::max<uint64_t>(a.walk_end, buf_[n - 1].end);
      if (next <= pos) return -EIO;  // no progress: never loop forever
      pos = next;
    }
    return 0;
  }

  // 0 when the VMA holding `addr` is registered with an async write-protect
  // userfaultfd, -EPERM when not. Looks at one page and changes nothing.
  int registered(uint64_t addr) {
    kabi::page_region r;
    kabi::pm_scan_arg a{};
    a.size = sizeof a;
    a.flags = kabi::kScanCheckWpAsync;
    a.start = addr;
    a.end = addr + kPage;
    a.vec = reinterpret_cast<uint64_t>(&r);
    a.vec_len = 1;
    a.category_mask = kabi::kPageIsWritten;
    a.return_mask = kabi::kPageIsWritten;
    return ::ioctl(fd_, kabi::kPagemapScan, &a) < 0 ? -errno : 0;
  }

  // Protects a VMA piece; appends what was written since the last time.
  int protect(Kind kind, Range r, std::vector<Range>* written) {
    if (kind == Kind::kAnon) return protect_anon(r.addr, r.end(), written);
    for (const Query* q : {&kWrittenFilePages, &kEmptyEntries, &kPrivateCopies}) {
      if (!q->protect && !written) continue;
      if (int e = scan(r.addr, r.end(), *q, written)) return e;
    }
    return 0;
  }

 private:
  int fd_;
  std::vector<kabi::page_region>& buf_;
  bool keep_huge_;
};

int register_wp(int uffd, Range r) {
  uffdio_register reg{};
  reg.range.start = r.addr;
  reg.range.len = r.len;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  return ::ioctl(uffd, UFFDIO_REGISTER, &reg) == 0 ? 0 : -errno;
}

Result<UniqueFd> open_pagemap(pid_t pid) {
  UniqueFd pm(::open(proc_path(pid, "pagemap").c_str(), O_RDONLY | O_CLOEXEC));
  if (!pm.valid()) return sys_error("opening " + proc_path(pid, "pagemap"));
  return pm;
}

// Whether the target's `fd` is a userfaultfd we set up (UFFDIO_API done with
// our features, as its fdinfo shows); the reason when it is not.
Status check_target_uffd(pid_t pid, int fd) {
  const std::string what = "fd " + std::to_string(fd);
  char link[256];
  ssize_t n = ::readlink(proc_path(pid, "fd/" + std::to_string(fd)).c_str(), link, sizeof link - 1);
  if (n < 0)
    return errno == ENOENT ? make_error(ENOENT, "the tracker's userfaultfd (" + what +
                                                    ") is gone from the target (closed, or exec)")
                           : sys_error("inspecting the target's " + what);
  if (std::string(link, size_t(n)) != "anon_inode:[userfaultfd]")
    return make_error(ENOENT, "the target's " + what + " is no longer the tracker's userfaultfd");
  CKPT_ASSIGN(std::string info, read_file(proc_path(pid, "fdinfo/" + std::to_string(fd))));
  size_t at = info.find("API:");
  uint64_t api = 0, features = 0;
  if (at == std::string::npos ||
      std::sscanf(info.c_str() + at, "API: %" SCNx64 ":%" SCNx64, &api, &features) != 2 ||
      (features & kFeatures) != kFeatures)
    return make_error(ENOENT,
                      "the target's " + what + " is a userfaultfd the tracker did not set up");
  return {};
}

// A userfaultfd at `fd` on which nobody ever called UFFDIO_API (features 0):
// what a tool killed between creating the tracker's userfaultfd and setting
// it up leaves behind; useless to the program, so a new arm takes its place.
bool is_unset_uffd(pid_t pid, int fd) {
  char link[256];
  ssize_t n = ::readlink(proc_path(pid, "fd/" + std::to_string(fd)).c_str(), link, sizeof link - 1);
  if (n < 0 || std::string(link, size_t(n)) != "anon_inode:[userfaultfd]") return false;
  auto info = read_file(proc_path(pid, "fdinfo/" + std::to_string(fd)));
  if (!info.ok()) return false;
  size_t at = info->find("API:");
  uint64_t api = 0, features = 0;
  return at != std::string::npos &&
         std::sscanf(info->c_str() + at, "API: %" SCNx64 ":%" SCNx64, &api, &features) == 2 &&
         features == 0;
}

// The userfaultfd number of the last install in a process, beside its
// ledger entry (a plain file: written at once, not deferred like side states).
void record_uffd_number(pid_t pid, int fd) {
  auto path = ledger_side_file(pid, ".uffd", true);
  if (!path) return;
  const std::string tmp = *path + ".tmp", text = std::to_string(fd) + "\n";
  UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (f.valid() && ::write(f.get(), text.data(), text.size()) == ssize_t(text.size()))
    (void)::rename(tmp.c_str(), path->c_str());
}

std::optional<int> recorded_uffd_number(pid_t pid) {
  auto path = ledger_side_file(pid, ".uffd", false);
  if (!path) return std::nullopt;
  auto text = read_file(*path);
  if (!text.ok() || text->empty()) return std::nullopt;
  const int fd = std::atoi(text->c_str());
  return fd >= 3 ? std::optional<int>(fd) : std::nullopt;
}

// kTrackerFd if free in the target, else the next free number below its
// RLIMIT_NOFILE, else the highest free one below kTrackerFd. Never an fd in
// use: the target's own descriptors are not ours to replace. Except our
// userfaultfd at kTrackerFd: the tracker of an earlier chain of this process
// (in another directory), which a new chain replaces. Passing over it left
// one more userfaultfd in the process per new chain, and the next checkpoint
// refused the process for the one it did not know. Or one a killed tool
// created there but never set up (is_unset_uffd).
Result<int> choose_target_fd(pid_t pid) {
  std::set<int> used;
  DIR* d = ::opendir(proc_path(pid, "fd").c_str());
  if (!d) return sys_error("listing " + proc_path(pid, "fd"));
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') used.insert(std::atoi(e->d_name));
  ::closedir(d);
  if (auto n = recorded_uffd_number(pid);
      n && (check_target_uffd(pid, *n).ok() || is_unset_uffd(pid, *n)))
    return *n;
  if (check_target_uffd(pid, kTrackerFd).ok() || is_unset_uffd(pid, kTrackerFd)) return kTrackerFd;
  long limit = kTrackerFd + 1;
  CKPT_ASSIGN(std::string limits, read_file(proc_path(pid, "limits")));
  size_t at = limits.find("Max open files");
  if (at != std::string::npos) limit = std::strtol(limits.c_str() + at + 14, nullptr, 10);
  for (long n = kTrackerFd; n < limit; ++n)
    if (!used.count(int(n))) return int(n);
  for (long n = std::min<long>(limit, kTrackerFd) - 1; n >= 3; --n)
    if (!used.count(int(n))) return int(n);
  return make_error(EMFILE, "no free file descriptor in the target for the tracker");
}

// Runs `body` as system calls injected into the stopped leader, then gives the
// thread back the registers it was stopped with, adjusted exactly as the
// kernel would have restarted a system call it was blocked in.

// Makes the target create a close-on-exec userfaultfd and put it at `number`
// (dup3 replaces a stale one there). Returns the number.
Result<int> create_target_uffd(pid_t pid, int number) {
  Status st = proc::with_injected_calls(pid, [&](proc::RemoteSyscall& rs) -> Status {
    CKPT_ASSIGN(long fd, rs.call_to_exit(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    // vm.unprivileged_userfaultfd = 0: an unprivileged target may still
    // create one that ignores kernel-mode faults, which WP_ASYNC never sees.
    if (fd == -EPERM) {
      CKPT_ASSIGN(
          fd, rs.call_to_exit(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kabi::kUffdUserModeOnly));
    }
    if (fd < 0) return sys_error("userfaultfd() in the target", int(-fd));
    if (fd == number) return {};
    CKPT_ASSIGN(long moved, rs.call_to_exit(SYS_dup3, uint64_t(fd), uint64_t(number), O_CLOEXEC));
    CKPT_ASSIGN(long closed, rs.call_to_exit(SYS_close, uint64_t(fd)));
    (void)closed;
    if (moved < 0) return sys_error("dup3() in the target", int(-moved));
    return {};
  });
  if (!st.ok()) return st.error();
  return number;
}

void close_target_fd(pid_t pid, int fd) {
  (void)proc::with_injected_calls(pid, [&](proc::RemoteSyscall& rs) -> Status {
    CKPT_ASSIGN(long r, rs.call_to_exit(SYS_close, uint64_t(fd)));
    (void)r;
    return {};
  });
}

// After a piece's written pages are collected (its huge pages read as
// written: never protected), protects the huge blocks whose content has not
// changed since the last collect, whole PMD by whole PMD (no split). What
// they read as written was collected already; it is appended again all the
// same, as adaptive.cpp does for its second scan. Blocks that were written
// after such a protection (and split by it) are unprotected and collapsed
// back (dirty/huge_blocks.hpp).
int protect_quiet_huge(Scanner& sc, HugeBlocks& huge, const ReadBlockFn& read, int uffd, int pidfd,
                       Range piece, std::vector<Range>* written) {
  std::vector<Range> unprotected, mapped, quiet, repair;
  if (int e = sc.scan(piece.addr, piece.end(), kHugeUnprotected, &unprotected)) return e;
  if (int e = sc.scan(piece.addr, piece.end(), kHugeMapped, &mapped)) return e;
  std::vector<Range> w = *written;
  normalize(w);
  huge.examine(piece, unprotected, mapped, w, read, &quiet, &repair);
  for (const Range& q : quiet)
    if (int e = sc.scan(q.addr, q.end(), kWritten, written)) return e;
  for (const Range& r : repair) {
    // Unprotected, every page of the block reads as written from now on:
    // nothing can be missed, whatever the collapse does.
    uffdio_writeprotect wp{};
    wp.range.start = r.addr;
    wp.range.len = r.len;
    wp.mode = 0;
    if (::ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) != 0) return -errno;
    if (pidfd >= 0) {
      iovec iov{reinterpret_cast<void*>(r.addr), r.len};
      (void)::syscall(SYS_process_madvise, pidfd, &iov, 1, MADV_COLLAPSE, 0);  // best effort
    }
  }
  return 0;
}

}  // namespace

PagemapScanTracker::Options PagemapScanTracker::Options::from(const TrackingOptions& t) {
  Options o;
  o.adaptive.enabled = t.adaptive;
  o.huge.keep_huge = t.keep_huge_pages;
  return o;
}

PagemapScanTracker::PagemapScanTracker(Options opts) : opts_(opts) {
  regions_.resize(std::max<size_t>(opts_.scan_regions, 1));
}

namespace {

constexpr const char* kWorks =
    "PAGEMAP_SCAN and userfaultfd WP_ASYNC available; zapped pages read as written";

FeatureCheck self_test() {
  FeatureCheck c{"pagemap-scan", false, ""};
  UniqueFd pm(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
  if (!pm.valid()) return c.detail = "cannot open /proc/self/pagemap", c;
  UniqueFd uffd(int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK)));
  if (!uffd.valid() && errno == EPERM)
    uffd.reset(int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kabi::kUffdUserModeOnly)));
  if (!uffd.valid()) return c.detail = std::string("userfaultfd: ") + std::strerror(errno), c;
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kFeatures;
  if (::ioctl(uffd.get(), UFFDIO_API, &api) != 0 || (api.features & kFeatures) != kFeatures)
    return c.detail = "userfaultfd lacks asynchronous write-protect (WP_ASYNC, Linux 6.7+)", c;

  // Self-test on 4 MiB of our own memory: a write, a zapped page, and a
  // zapped 2 MiB range (a THP if we get one) whose page table goes away.
  constexpr uint64_t kHuge = 2 << 20;
  void* raw =
      ::mmap(nullptr, 3 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return c.detail = "self-test: mmap failed", c;
  char* mem = reinterpret_cast<char*>((reinterpret_cast<uint64_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  struct Unmap {
    void* p;
    ~Unmap() { ::munmap(p, 3 * kHuge); }
  } unmap{raw};
  (void)::madvise(mem, 2 * kHuge, MADV_HUGEPAGE);
  std::memset(mem, 1, 2 * kHuge);
  (void)::madvise(mem + kHuge, kHuge, 25 /* MADV_COLLAPSE: best effort */);
  std::vector<kabi::page_region> buf(64);
  Scanner sc(pm.get(), buf);
  Range all{reinterpret_cast<uint64_t>(mem), 2 * kHuge};
  if (register_wp(uffd.get(), all) != 0)
    return c.detail = std::string("self-test: UFFDIO_REGISTER: ") + std::strerror(errno), c;
  if (int e = sc.scan(all.addr, all.end(), kWritten, nullptr))
    return c.detail = e == -ENOTTY || e == -EINVAL
                          ? "kernel has no PAGEMAP_SCAN (needs Linux 6.7+)"
                          : std::string("self-test: PAGEMAP_SCAN: ") + std::strerror(-e),
           c;
  mem[3 * kPage] = 2;
  ::madvise(mem + kPage, kPage, MADV_DONTNEED);
  ::madvise(mem + kHuge, kHuge, MADV_DONTNEED);
  std::vector<Range> got;
  if (int e = sc.scan(all.addr, all.end(), kWritten, &got))
    return c.detail = std::string("self-test: PAGEMAP_SCAN: ") + std::strerror(-e), c;
  std::vector<Range> need{
      {all.addr + kPage, kPage}, {all.addr + 3 * kPage, kPage}, {all.addr + kHuge, kHuge}};
  normalize(got);
  if (!subtract(need, got).empty())
    return c.detail =
               "kernel does not report pages zapped by MADV_DONTNEED as written "
               "(needs the PAGEMAP_SCAN hole fix)",
           c;
  c.ok = true;
  c.detail = kWorks;
  return c;
}

}  // namespace

// The self-test faults in and zaps 4 MiB (1-20 ms here): once per boot
// (dirty/self_test_record.hpp), else once per process before the first
// freeze (job/checkpoint.cpp asks early). The kernel's answer does not change
// while it runs; a failure, which may be ours (no memory, no descriptor
// left), is asked again.
FeatureCheck PagemapScanTracker::probe() {
  static std::mutex mu;
  static std::optional<FeatureCheck> passed;
  std::lock_guard<std::mutex> hold(mu);
  if (passed) return *passed;
  if (self_test_passed_this_boot("pagemap-scan")) {
    passed = FeatureCheck{"pagemap-scan", true,
                          std::string(kWorks) + " (self-test passed earlier in this boot)"};
    return *passed;
  }
  FeatureCheck c = self_test();
  if (c.ok) {
    passed = c;
    record_self_test_pass("pagemap-scan");
  }
  return c;
}

Status PagemapScanTracker::available() {
  if (!probed_) probed_ = probe();
  if (!probed_->ok) return make_error(ENOTSUP, "pagemap-scan tracker: " + probed_->detail);
  return {};
}

Status PagemapScanTracker::track(pid_t pid, int uffd, const std::vector<VmaRecord>& vmas,
                                 bool reused, const TrackerState& state, bool* foreign) {
  CKPT_ASSIGN(UniqueFd pm, open_pagemap(pid));
  CKPT_ASSIGN(auto maps, proc::read_maps(pid));
  Scanner sc(pm.get(), regions_, opts_.huge.keep_huge);
  std::vector<std::pair<Kind, Range>> pieces;
  bool any_registered = false;
  for (const VmaRecord& v : vmas) {
    Kind kind = classify(v);
    if (kind != Kind::kAnon && kind != Kind::kFile) continue;
    for (Range r : kernel_pieces(maps, v)) {
      pieces.push_back({kind, r});
      any_registered = any_registered || (reused && sc.registered(r.addr) == 0);
    }
  }
  // See collect(): a kept userfaultfd that tracks none of these VMAs belongs
  // to another process; registering through it would act on that process.
  if (reused && !pieces.empty() && !any_registered) {
    *foreign = true;
    return {};
  }
  AdaptiveTracking adaptive(opts_.adaptive);
  adaptive.carry_over(pid);
  for (const auto& [kind, r] : pieces) {
    // A VMA that cannot be registered (owned by another userfaultfd,
    // unsupported) is found unregistered by collect() and reported unknown.
    if (register_wp(uffd, r) != 0) continue;
    int e = 0;
    std::vector<Range> populated;  // a full with page hashes samples blocks mostly present
    if (kind == Kind::kAnon && state.full_hashes && adaptive.enabled())
      e = sc.scan(r.addr, r.end(), kPresent, &populated);
    if (e == 0 && kind != Kind::kAnon)
      e = sc.protect(kind, r, nullptr);
    else if (e == 0)
      for (const Range& p : adaptive.arm_piece(r, state.full_hashes ? &populated : nullptr))
        if ((e = sc.protect(kind, p, nullptr)) != 0) break;
    // Registered through this fd, yet not in this process. A fresh fd is the
    // process's own: its piece was replaced while the process ran (a live
    // full's arm), and collect() finds the new VMA unregistered.
    if (e == -EPERM && reused) {
      *foreign = true;
      return {};
    }
  }
  adaptive.save(pid, state);
  sampled_bytes_ = adaptive.sampled_bytes();
  return {};
}

namespace {

// Where a new userfaultfd goes: a restored process gets its userfaultfd back
// at the recorded number when that is free, so later checkpoints recognise
// it; otherwise -1 (choose_target_fd picks one).
int fresh_fd_number(pid_t pid, const TrackerState& state) {
  if (state.target_fd >= 0 &&
      ::access(proc_path(pid, "fd/" + std::to_string(state.target_fd)).c_str(), F_OK) != 0)
    return state.target_fd;
  return -1;
}

}  // namespace

Result<UniqueFd> PagemapScanTracker::install_fresh(pid_t pid, TrackerState* state, int replace_fd) {
  state->target_fd = -1;
  int number = replace_fd;
  if (number < 0) {
    CKPT_ASSIGN(number, choose_target_fd(pid));
  }
  CKPT_ASSIGN(int fd, create_target_uffd(pid, number));
  record_uffd_number(pid, fd);
  auto uffd = proc::take_fd(pid, fd);
  Status st = uffd.ok() ? Status{} : Status{uffd.error()};
  if (st.ok()) {
    // Once per userfaultfd: a second UFFDIO_API fails with EINVAL.
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = kFeatures;
    if (::ioctl(uffd->get(), UFFDIO_API, &api) != 0)
      st = sys_error("UFFDIO_API on the target's userfaultfd");
    else if ((api.features & kFeatures) != kFeatures)
      st = make_error(ENOTSUP, "the target's userfaultfd lacks WP_ASYNC");
  }
  if (!st.ok()) {
    close_target_fd(pid, fd);  // leave nothing half set up behind
    return st.error();
  }
  state->target_fd = fd;
  return std::move(*uffd);
}

Status PagemapScanTracker::track_fresh(pid_t pid, int uffd, const std::vector<VmaRecord>& vmas,
                                       const TrackerState& state) {
  bool foreign = false;
  CKPT_TRY(track(pid, uffd, vmas, false, state, &foreign));
  if (foreign) return make_error(EIO, "a fresh userfaultfd does not track the target's memory");
  return {};
}

Status PagemapScanTracker::arm_fresh(pid_t pid, const std::vector<VmaRecord>& vmas,
                                     TrackerState* state, int replace_fd) {
  CKPT_ASSIGN(UniqueFd uffd, install_fresh(pid, state, replace_fd));
  return track_fresh(pid, uffd.get(), vmas, *state);
}

Result<bool> PagemapScanTracker::install(pid_t pid, TrackerState* state) {
  installed_.reset();
  CKPT_TRY(available());
  if (state->target_fd >= 0 && check_target_uffd(pid, state->target_fd).ok()) return false;
  CKPT_ASSIGN(installed_, install_fresh(pid, state, fresh_fd_number(pid, *state)));
  return true;
}

// Tracking restarts for the generation in `state`; the ledger says so (when
// it cannot be written, the next collect finds it stale and saves all).
int own_uffd_number(pid_t pid) {
  auto n = recorded_uffd_number(pid);
  return n && check_target_uffd(pid, *n).ok() ? *n : kTrackerFd;
}

Result<bool> PagemapScanTracker::release(pid_t pid, const TrackerState& state) {
  if (state.target_fd < 0) return false;
  Status ours = check_target_uffd(pid, state.target_fd);
  if (!ours.ok()) {
    if (ours.error().code == ENOENT) return false;  // closed or replaced: not ours to close
    return ours.error();
  }
  long r = -1;
  CKPT_TRY(proc::with_injected_calls(pid, [&](proc::RemoteSyscall& rs) -> Status {
    CKPT_ASSIGN(r, rs.call_to_exit(SYS_close, uint64_t(state.target_fd)));
    return {};
  }));
  if (r < 0) return sys_error("closing the tracker's userfaultfd in the target", int(-r));
  return true;
}

Status PagemapScanTracker::arm(pid_t pid, const std::vector<VmaRecord>& vmas, TrackerState* state) {
  if (installed_.valid()) {
    const UniqueFd uffd = std::move(installed_);
    CKPT_TRY(track_fresh(pid, uffd.get(), vmas, *state));
  } else {
    CKPT_TRY(arm_tracking(pid, vmas, state));
  }
  record_arm(pid, *state);
  return {};
}

Status PagemapScanTracker::arm_tracking(pid_t pid, const std::vector<VmaRecord>& vmas,
                                        TrackerState* state) {
  CKPT_TRY(available());
  if (state->target_fd >= 0 && check_target_uffd(pid, state->target_fd).ok()) {
    // Already tracking (a new full checkpoint of a tracked process): keep the
    // userfaultfd, whose UFFDIO_API is done, and restart from this instant.
    CKPT_ASSIGN(UniqueFd uffd, proc::take_fd(pid, state->target_fd));
    bool foreign = false;
    CKPT_TRY(track(pid, uffd.get(), vmas, true, *state, &foreign));
    if (!foreign) return {};
    uffd.reset();  // our copy must not keep the stale context alive
    return arm_fresh(pid, vmas, state, state->target_fd);
  }
  return arm_fresh(pid, vmas, state, fresh_fd_number(pid, *state));
}

namespace {

bool private_anon(const proc::MapEntry& m) {
  return !m.shared && m.inode == 0 &&
         (m.path.empty() || m.path == "[heap]" || m.path == "[stack]" ||
          m.path.rfind("[anon:", 0) == 0);
}

// The first entry of `hashes` (sorted by address) at or after `va`.
std::vector<image::PageHash>::const_iterator hash_at_or_after(
    const std::vector<image::PageHash>& hashes, uint64_t va) {
  return std::lower_bound(hashes.begin(), hashes.end(), va,
                          [](const image::PageHash& h, uint64_t a) { return h.vaddr < a; });
}

// Pages of `r` whose content differs from `hashes` (sorted by address),
// read from the target into `buf` (at least r.len bytes). A page the table
// lacks: with `complete` (a full's table) it was not populated then (zero),
// else it changed. A range that cannot be read changed.
void compare_with_hashes(mem::RemoteReader& reader, Range r,
                         const std::vector<image::PageHash>& hashes, std::vector<uint8_t>& buf,
                         std::vector<Range>* changed, bool complete = true) {
  if (!reader.read(&r, 1, buf.data()).ok()) {
    mem::append_range(*changed, r.addr, r.len);
    return;
  }
  static const uint64_t zero_hash = xxh3(zero_bytes(), kPage);
  auto it = hash_at_or_after(hashes, r.addr);
  for (uint64_t off = 0; off < r.len; off += kPage) {
    const uint64_t va = r.addr + off;
    while (it != hashes.end() && it->vaddr < va) ++it;
    const uint64_t h = xxh3(buf.data() + off, kPage);
    const bool same =
        it != hashes.end() && it->vaddr == va ? it->hash == h : complete && h == zero_hash;
    if (!same) mem::append_range(*changed, va, kPage);
  }
}

}  // namespace

void PagemapScanTracker::before_freeze(pid_t pid, const std::vector<image::PageHash>& hashes,
                                       const TrackerState& state) {
  claim_.reset();
  verified_.clear();
  verified_bytes_ = 0;
  if (state.target_fd < 0 || !available().ok()) return;
  // The collect's ledger record, written now rather than in the freeze.
  const uint64_t token = claim_collect(pid, state);
  if (!token) return;
  claim_ = Claim{state, token};
  if (hashes.empty()) return;
  AdaptiveTracking adaptive(opts_.adaptive);
  adaptive.load(pid, state);
  const std::vector<uint64_t> fresh = adaptive.fresh_blocks(), hot = adaptive.hot_blocks(),
                              sampled = adaptive.sampled_blocks();
  if ((fresh.empty() && hot.empty() && sampled.empty()) ||
      !check_target_uffd(pid, state.target_fd).ok())
    return;
  auto pm = open_pagemap(pid);
  auto maps = proc::read_maps(pid);
  if (!pm.ok() || !maps.ok()) return;
  Scanner sc(pm->get(), regions_, opts_.huge.keep_huge);
  const ScanFn look = [&](uint64_t s, uint64_t e, bool, std::vector<Range>* out) {
    return sc.scan(s, e, kWrittenKeep, out);
  };
  mem::RemoteReader reader(pid);
  std::vector<uint8_t> buf(kAdaptiveBlock);
  // The block at `start` while it lies in one private anonymous mapping.
  auto block_at = [&](uint64_t start) -> std::optional<Range> {
    auto m = std::lower_bound(maps->begin(), maps->end(), start,
                              [](const proc::MapEntry& e, uint64_t a) { return e.end <= a; });
    if (m == maps->end() || m->start > start || !private_anon(*m)) return std::nullopt;
    return Range{start, std::min(m->end, (start & ~(kAdaptiveBlock - 1)) + kAdaptiveBlock) - start};
  };
  // Whether a hot block's sample still holds, mostly, the content the parent
  // recorded (its pages read as written whatever the program did).
  auto content_calm = [&](Range b) {
    uint64_t pages = 0, changed = 0;
    for (const Range& c : AdaptiveTracking::sample_pages(b.addr, b.end())) {
      std::vector<Range> differ;
      compare_with_hashes(reader, c, hashes, buf, &differ, false);
      pages += c.len / kPage;
      for (const Range& d : differ) changed += d.len / kPage;
    }
    return adaptive.calm(changed, pages);
  };
  // The blocks to verify: fresh and sampled ones whose sample (protected)
  // stayed calm; hot ones that the parent's writer found mostly unchanged
  // and whose sample's content did not change since either (not written
  // for two intervals: one written every other interval stays hot, its
  // copy costs the program less than a fault per page). `complete`:
  // the parent's table holds every populated page (a full's: fresh blocks).
  struct Candidate {
    Range r;
    bool complete;
  };
  std::vector<Candidate> blocks;
  for (uint64_t start : fresh)
    if (auto b = block_at(start); b && adaptive.sample_calm(b->addr, b->end(), look))
      blocks.push_back({*b, true});
  for (uint64_t start : sampled)
    if (auto b = block_at(start); b && adaptive.sample_calm(b->addr, b->end(), look))
      blocks.push_back({*b, false});
  for (uint64_t start : hot)
    if (auto b = block_at(start); b && adaptive.content_calm(b->addr, b->end()) && content_calm(*b))
      blocks.push_back({*b, false});
  // From here on, pages get protected: the collect depends on what this
  // object learns, which the claim above guards.
  for (const auto& [b, complete] : blocks) {
    std::vector<Range> live, populated, changed;
    if (sc.protect_anon(b.addr, b.end(), &live) != 0 ||
        sc.scan(b.addr, b.end(), kPopulated, &populated) != 0) {
      verified_[b.addr] = {b};  // partly protected, perhaps: all of it changed
      verified_bytes_ += b.len;
      continue;
    }
    normalize(live);
    normalize(populated);
    // Read as written and empty: changed if the parent had the page (with
    // a table that is not complete, whatever it had).
    for (const Range& r : subtract(live, populated))
      for (uint64_t va = r.addr; va < r.end(); va += kPage)
        if (auto h = hash_at_or_after(hashes, va);
            !complete || (h != hashes.end() && h->vaddr == va))
          mem::append_range(changed, va, kPage);
    // Read as written and populated: by content.
    for (const Range& r : subtract(live, subtract(live, populated)))
      compare_with_hashes(reader, r, hashes, buf, &changed, complete);
    normalize(changed);
    verified_bytes_ += b.len;
    verified_[b.addr] = std::move(changed);
  }
}

std::unique_ptr<ContentFilter> PagemapScanTracker::filter(const std::vector<image::PageHash>& prev,
                                                          image::SnapshotWriter& writer) {
  if (!collected_ || !opts_.adaptive.enabled) return nullptr;
  Collected c = *collected_;
  collected_.reset();
  return std::make_unique<ChangedPagesFilter>(prev, writer, [c](const BlockContentMap& blocks) {
    write_side_state(c.pid, kContentSuffix, c.state, format_block_content(blocks));
  });
}

uint64_t PagemapScanTracker::written_estimate(pid_t pid, const TrackerState& state) {
  if (state.target_fd < 0 || !available().ok()) return 0;
  auto pm = open_pagemap(pid);
  auto maps = proc::read_maps(pid);
  if (!pm.ok() || !maps.ok()) return 0;
  Scanner sc(pm->get(), regions_);
  uint64_t bytes = 0;
  std::vector<Range> written;
  for (const proc::MapEntry& m : *maps) {
    written.clear();
    if (!private_anon(m) || sc.scan(m.start, m.end, kWrittenPresent, &written) != 0) continue;
    for (const Range& r : written) bytes += r.len;
  }
  return bytes;
}

Result<DirtySet> PagemapScanTracker::collect(pid_t pid, const std::vector<VmaRecord>& vmas,
                                             const std::vector<VmaRecord>& prev,
                                             TrackerState* state) {
  collected_.reset();
  CKPT_TRY(available());
  // Tracking is lost: everything is dirty this time; track from now on.
  auto lost = [&](const std::string& why, int replace_fd) -> Result<DirtySet> {
    DirtySet all;
    all.everything = true;
    all.reason = why;
    Status st = arm_fresh(pid, vmas, state, replace_fd);
    if (!st.ok())
      all.reason += "; arming again failed: " + st.error().message;
    else
      record_arm(pid, *state);
    return all;
  };
  if (state->target_fd < 0) return lost("tracking was not armed for this process", -1);
  if (Status ok = check_target_uffd(pid, state->target_fd); !ok.ok())
    return lost(ok.error().message + ": tracking lost", -1);
  // Tracking must have been reset last by the parent generation; the ledger
  // names this generation before the reset below, so a collect that is not
  // committed (a killed tool) is found out by the next one.
  // When it was not, the userfaultfd is still ours and works; only its
  // history belongs to another generation. Tracking restarts through it, by
  // ioctls from here: no call is injected, so a tool killed now (as after
  // the killed collect that made this one necessary) cannot hurt the target.
  auto history_lost = [&](const std::string& why) -> Result<DirtySet> {
    DirtySet all;
    all.everything = true;
    all.reason = why;
    record_arm(pid, *state);
    if (Status st = arm_tracking(pid, vmas, state); !st.ok())
      all.reason += "; arming again failed: " + st.error().message;
    return all;
  };
  // before_freeze() claimed this generation (and may have verified blocks
  // for it): the record must still be that claim.
  uint64_t token = 0;
  if (claim_ && claim_->state.chain_id == state->chain_id &&
      claim_->state.prev_generation == state->prev_generation &&
      claim_->state.generation == state->generation)
    token = claim_->token;
  claim_.reset();
  const bool verified = token && !verified_.empty();
  CKPT_ASSIGN(std::string untrusted, begin_collect(pid, *state, token));
  if (!untrusted.empty()) return history_lost(untrusted);
  CKPT_ASSIGN(UniqueFd uffd, proc::take_fd(pid, state->target_fd));
  CKPT_ASSIGN(UniqueFd pm, open_pagemap(pid));
  CKPT_ASSIGN(auto maps, proc::read_maps(pid));
  Scanner sc(pm.get(), regions_, opts_.huge.keep_huge);
  AdaptiveTracking adaptive(opts_.adaptive);
  adaptive.load(pid, *state);
  const ScanFn scan_anon = [&](uint64_t s, uint64_t e, bool protect, std::vector<Range>* out) {
    return protect ? sc.protect_anon(s, e, out) : sc.scan(s, e, kWrittenKeep, out);
  };
  HugeBlocks huge(opts_.huge);
  huge.load(pid, *state);
  UniqueFd pidfd(huge.enabled() ? int(::syscall(SYS_pidfd_open, pid, 0)) : -1);
  mem::RemoteReader reader(pid);
  const ReadBlockFn read_block = [&](uint64_t addr, uint8_t* buf) {
    Range r{addr, kHugeBlock};
    return reader.read(&r, 1, buf).ok();
  };

  struct Piece {
    Kind kind;
    Range r;
    bool registered;
  };
  std::vector<Piece> pieces;
  DirtySet out;
  bool any_registered = false;
  for (const VmaRecord& v : vmas) {
    Kind kind = classify(v);
    if (kind == Kind::kSkip) continue;
    if (kind == Kind::kUnknown) {
      out.unknown.push_back(Range{v.start, v.size()});
      continue;
    }
    for (Range r : uncovered(v, prev)) out.unknown.push_back(r);
    for (Range r : kernel_pieces(maps, v)) {
      int e = sc.registered(r.addr);
      if (e != 0 && e != -EPERM) {
        out.unknown.push_back(r);
        continue;
      }
      pieces.push_back({kind, r, e == 0});
      any_registered |= e == 0;
    }
  }
  // No VMA registered at all: this userfaultfd is not the one tracking this
  // process (e.g. inherited across fork, where the child's VMAs lose their
  // registration). Decided before registering anything through it, since
  // registration acts on the memory of the process that created it.
  if (!pieces.empty() && !any_registered) {
    int stale = state->target_fd;
    uffd.reset();
    return lost("the userfaultfd at fd " + std::to_string(stale) +
                    " does not track this process (inherited across fork?)",
                stale);
  }

  bool foreign = false;
  for (const Piece& p : pieces) {
    // Re-registering our own VMA is a no-op; it fails for a VMA owned by
    // another userfaultfd, whose owner may re-protect pages behind our back.
    if (register_wp(uffd.get(), p.r) != 0) {
      out.unknown.push_back(p.r);
      continue;
    }
    std::vector<Range> written;
    int e = p.kind == Kind::kAnon && p.registered
                ? adaptive.collect_piece(p.r, scan_anon, &written, verified ? &verified_ : nullptr)
                : sc.protect(p.kind, p.r, &written);
    if (e == 0 && p.kind == Kind::kAnon && huge.enabled())
      e = protect_quiet_huge(sc, huge, read_block, uffd.get(), pidfd.get(), p.r, &written);
    if (!p.registered) {
      // New, moved or replaced: no history. Protected now, reported whole.
      foreign |= e == -EPERM;
      out.unknown.push_back(p.r);
    } else if (e != 0) {
      out.unknown.push_back(p.r);
    } else {
      out.written.insert(out.written.end(), written.begin(), written.end());
    }
  }
  if (foreign) {
    int stale = state->target_fd;
    uffd.reset();
    return lost(
        "the userfaultfd at fd " + std::to_string(stale) + " does not track this process's memory",
        stale);
  }
  verified_.clear();
  adaptive.save(pid, *state);
  collected_ = Collected{pid, *state};
  hot_bytes_ = adaptive.hot_bytes();
  sampled_bytes_ = adaptive.sampled_bytes();
  huge.save(pid, *state);
  huge_kept_bytes_ = huge.kept_bytes();
  huge_quiet_bytes_ = huge.quiet_bytes();
  huge_repaired_bytes_ = huge.repaired_bytes();
  normalize(out.unknown);
  normalize(out.written);
  out.written = subtract(out.written, out.unknown);
  return out;
}

}  // namespace ckpt::dirty
