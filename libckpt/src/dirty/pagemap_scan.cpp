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
#include "dirty/pagemap_query.hpp"
#include "dirty/self_test_record.hpp"
#include "dirty/target_uffd.hpp"
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
    if (!proc::private_anonymous(m) || sc.scan(m.start, m.end, kWrittenPresent, &written) != 0)
      continue;
    for (const Range& r : written) bytes += r.len;
  }
  return bytes;
}

namespace {

// A kernel VMA (or the part of one in a recorded VMA) to collect, and
// whether our userfaultfd covers it already.
struct Piece {
  Kind kind;
  Range r;
  bool registered;
};

// The pieces of `vmas` to collect; what cannot be tracked goes to
// out->unknown. Returns whether any piece is registered with us.
bool list_pieces(Scanner& sc, const std::vector<proc::MapEntry>& maps,
                 const std::vector<VmaRecord>& vmas, const std::vector<VmaRecord>& prev,
                 std::vector<Piece>* pieces, DirtySet* out) {
  bool any_registered = false;
  for (const VmaRecord& v : vmas) {
    Kind kind = classify(v);
    if (kind == Kind::kSkip) continue;
    if (kind == Kind::kUnknown) {
      out->unknown.push_back(Range{v.start, v.size()});
      continue;
    }
    for (Range r : uncovered(v, prev)) out->unknown.push_back(r);
    for (Range r : kernel_pieces(maps, v)) {
      int e = sc.registered(r.addr);
      if (e != 0 && e != -EPERM) {
        out->unknown.push_back(r);
        continue;
      }
      pieces->push_back({kind, r, e == 0});
      any_registered |= e == 0;
    }
  }
  return any_registered;
}

// Lists a piece's written pages and protects it again: private anonymous
// memory through adaptive tracking (and its quiet huge pages), the rest
// whole. Returns 0 or -errno.
struct PieceCollector {
  Scanner& sc;
  AdaptiveTracking& adaptive;
  HugeBlocks& huge;
  int uffd;
  int pidfd;
  mem::RemoteReader& reader;
  const VerifiedBlocks* verified;  // null: none for this generation

  int collect(const Piece& p, std::vector<Range>* written) {
    const ScanFn scan_anon = [&](uint64_t s, uint64_t e, bool protect, std::vector<Range>* out) {
      return protect ? sc.protect_anon(s, e, out) : sc.scan(s, e, kWrittenKeep, out);
    };
    const ReadBlockFn read_block = [&](uint64_t addr, uint8_t* buf) {
      Range r{addr, kHugeBlock};
      return reader.read(&r, 1, buf).ok();
    };
    int e = p.kind == Kind::kAnon && p.registered
                ? adaptive.collect_piece(p.r, scan_anon, written, verified)
                : sc.protect(p.kind, p.r, written);
    if (e == 0 && p.kind == Kind::kAnon && huge.enabled())
      e = protect_quiet_huge(sc, huge, read_block, uffd, pidfd, p.r, written);
    return e;
  }
};

}  // namespace

DirtySet PagemapScanTracker::tracking_lost(pid_t pid, const std::vector<VmaRecord>& vmas,
                                           TrackerState* state, const std::string& why,
                                           int replace_fd) {
  DirtySet all;
  all.everything = true;
  all.reason = why;
  Status st = arm_fresh(pid, vmas, state, replace_fd);
  if (!st.ok())
    all.reason += "; arming again failed: " + st.error().message;
  else
    record_arm(pid, *state);
  return all;
}

// The userfaultfd is still ours and works; only its history belongs to
// another generation. Tracking restarts through it, by ioctls from here: no
// call is injected, so a tool killed now (as after the killed collect that
// made this one necessary) cannot hurt the target.
DirtySet PagemapScanTracker::history_lost(pid_t pid, const std::vector<VmaRecord>& vmas,
                                          TrackerState* state, const std::string& why) {
  DirtySet all;
  all.everything = true;
  all.reason = why;
  record_arm(pid, *state);
  if (Status st = arm_tracking(pid, vmas, state); !st.ok())
    all.reason += "; arming again failed: " + st.error().message;
  return all;
}

uint64_t PagemapScanTracker::take_claim(const TrackerState& state) {
  uint64_t token = 0;
  if (claim_ && claim_->state.chain_id == state.chain_id &&
      claim_->state.prev_generation == state.prev_generation &&
      claim_->state.generation == state.generation)
    token = claim_->token;
  claim_.reset();
  return token;
}

Result<DirtySet> PagemapScanTracker::collect(pid_t pid, const std::vector<VmaRecord>& vmas,
                                             const std::vector<VmaRecord>& prev,
                                             TrackerState* state) {
  collected_.reset();
  CKPT_TRY(available());
  if (state->target_fd < 0)
    return tracking_lost(pid, vmas, state, "tracking was not armed for this process", -1);
  if (Status ok = check_target_uffd(pid, state->target_fd); !ok.ok())
    return tracking_lost(pid, vmas, state, ok.error().message + ": tracking lost", -1);
  // Tracking must have been reset last by the parent generation; the ledger
  // names this generation before the reset below, so a collect that is not
  // committed (a killed tool) is found out by the next one. before_freeze()
  // claimed this generation (and may have verified blocks for it): the
  // record must still be that claim.
  const uint64_t token = take_claim(*state);
  const bool verified = token && !verified_.empty();
  CKPT_ASSIGN(std::string untrusted, begin_collect(pid, *state, token));
  if (!untrusted.empty()) return history_lost(pid, vmas, state, untrusted);
  CKPT_ASSIGN(UniqueFd uffd, proc::take_fd(pid, state->target_fd));
  CKPT_ASSIGN(UniqueFd pm, open_pagemap(pid));
  CKPT_ASSIGN(auto maps, proc::read_maps(pid));
  Scanner sc(pm.get(), regions_, opts_.huge.keep_huge);

  std::vector<Piece> pieces;
  DirtySet out;
  // No VMA registered at all: this userfaultfd is not the one tracking this
  // process (e.g. inherited across fork, where the child's VMAs lose their
  // registration). Decided before registering anything through it, since
  // registration acts on the memory of the process that created it.
  if (!list_pieces(sc, maps, vmas, prev, &pieces, &out) && !pieces.empty()) {
    int stale = state->target_fd;
    uffd.reset();
    return tracking_lost(pid, vmas, state,
                         "the userfaultfd at fd " + std::to_string(stale) +
                             " does not track this process (inherited across fork?)",
                         stale);
  }

  AdaptiveTracking adaptive(opts_.adaptive);
  adaptive.load(pid, *state);
  HugeBlocks huge(opts_.huge);
  huge.load(pid, *state);
  UniqueFd pidfd(huge.enabled() ? int(::syscall(SYS_pidfd_open, pid, 0)) : -1);
  mem::RemoteReader reader(pid);
  PieceCollector collector{
      sc, adaptive, huge, uffd.get(), pidfd.get(), reader, verified ? &verified_ : nullptr};
  bool foreign = false;
  for (const Piece& p : pieces) {
    // Re-registering our own VMA is a no-op; it fails for a VMA owned by
    // another userfaultfd, whose owner may re-protect pages behind our back.
    if (register_wp(uffd.get(), p.r) != 0) {
      out.unknown.push_back(p.r);
      continue;
    }
    std::vector<Range> written;
    int e = collector.collect(p, &written);
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
    return tracking_lost(
        pid, vmas, state,
        "the userfaultfd at fd " + std::to_string(stale) + " does not track this process's memory",
        stale);
  }
  verified_.clear();
  remember(pid, *state, adaptive, huge);
  normalize(out.unknown);
  normalize(out.written);
  out.written = subtract(out.written, out.unknown);
  return out;
}

void PagemapScanTracker::remember(pid_t pid, const TrackerState& state,
                                  const AdaptiveTracking& adaptive, const HugeBlocks& huge) {
  adaptive.save(pid, state);
  collected_ = Collected{pid, state};
  hot_bytes_ = adaptive.hot_bytes();
  sampled_bytes_ = adaptive.sampled_bytes();
  huge.save(pid, state);
  huge_kept_bytes_ = huge.kept_bytes();
  huge_quiet_bytes_ = huge.quiet_bytes();
  huge_repaired_bytes_ = huge.repaired_bytes();
}

}  // namespace ckpt::dirty
