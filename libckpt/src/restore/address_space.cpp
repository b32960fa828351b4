#include "restore/address_space.hpp"

#include <fcntl.h>
#include <linux/prctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "image/format.hpp"
#include "mem/madvise.hpp"
#include "mem/range.hpp"
#include "proc/maps.hpp"
#include "restore/batch_verifier.hpp"
#include "restore/uffd_fill.hpp"
#include "util/hash.hpp"
#include "util/phase_trace.hpp"
#include "util/text.hpp"
#include "util/zeros.hpp"

namespace ckpt::restore {

static_assert(kZeroBytes >= image::kMaxRunPages * image::kPageSize, "zero runs fit");

using image::kPageSize;
using image::VmaRecord;

namespace {

// Lowest address >= 4 GiB where `len` bytes (plus a guard page each side)
// overlap none of `busy`.
uint64_t find_gap(std::vector<mem::Range> busy, uint64_t len) {
  std::sort(busy.begin(), busy.end(), [](auto& a, auto& b) { return a.addr < b.addr; });
  uint64_t cand = 1ull << 32;
  for (const auto& r : busy) {
    if (r.end() + kPageSize <= cand) continue;
    if (cand + len + kPageSize <= r.addr) break;
    cand = r.end() + kPageSize;
  }
  return cand;
}

bool is_special_name(const std::string& n) {
  return n == "[vdso]" || n == "[vvar]" || n == "[vvar_vclock]";
}

std::string where_of(const VmaRecord& v) {
  return "mapping " + hex(v.start) + "-" + hex(v.end) + " " + v.name;
}

}  // namespace

Result<long> AddressSpaceBuilder::sys(const char* what, long nr, uint64_t a1, uint64_t a2,
                                      uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6) {
  CKPT_ASSIGN(long ret, rs_.call(nr, a1, a2, a3, a4, a5, a6));
  if (proc::is_syscall_error(ret)) return sys_error(what, int(-ret));
  return ret;
}

Result<uint64_t> AddressSpaceBuilder::put_data(const void* data, size_t len, size_t offset) {
  if (offset + len > kPageSize)
    return make_error(ENAMETOOLONG, "argument too long for the trampoline");
  uint64_t addr = tramp_ + kPageSize + offset;
  iovec local{const_cast<void*>(data), len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  if (::process_vm_writev(pid_, &local, 1, &remote, 1, 0) != ssize_t(len))
    return sys_error("writing into the new process");
  return addr;
}

Status AddressSpaceBuilder::map_trampoline(bool bare_syscall) {
  CKPT_ASSIGN(auto child_maps, proc::read_maps(pid_));
  std::vector<mem::Range> busy;
  for (const auto& m : child_maps) busy.push_back({m.start, m.end - m.start});
  for (const VmaRecord& v : meta_.vmas) busy.push_back({v.start, v.size()});
  tramp_ = find_gap(busy, kTrampolineLen);
  const uint64_t prot = PROT_READ | PROT_WRITE | PROT_EXEC,
                 flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
  CKPT_ASSIGN(long got, bare_syscall ? rs_.call_to_exit(SYS_mmap, tramp_, kTrampolineLen, prot,
                                                        flags, uint64_t(-1), 0)
                                     : sys("mapping the restore trampoline", SYS_mmap, tramp_,
                                           kTrampolineLen, prot, flags, uint64_t(-1), 0));
  if (uint64_t(got) != tramp_) return make_error(EFAULT, "trampoline landed at the wrong address");
  // "syscall; int3", then the batch loop.
  std::vector<uint8_t> code(kBatchCodeOffset, 0xcc);
  std::copy(proc::kInjectInsnBytes, proc::kInjectInsnBytes + proc::kInjectInsnLen, code.begin());
  code.insert(code.end(), ckpt_batch_code, ckpt_batch_code_end);
  CKPT_TRY(proc::write_remote(pid_, tramp_, code.data(), code.size()));
  rs_.set_insn(tramp_);
  return {};
}

CallBatch AddressSpaceBuilder::batch() {
  return batch(rs_);
}

CallBatch AddressSpaceBuilder::batch(proc::RemoteSyscall& rs) {
  BatchArea a;
  a.code = tramp_ + kBatchCodeOffset;
  a.table = tramp_ + 2 * kPageSize;
  a.max_calls = 2 * kPageSize / proc::RemoteSyscall::kBatchEntry;
  a.strings = tramp_ + 4 * kPageSize;
  a.strings_len = 3 * kPageSize;
  return CallBatch(pid_, rs, a);
}

// One munmap per stretch between the mappings that stay (the trampoline, the
// vdso's): an injected call costs a round trip to the child, and the child
// inherited every mapping of this program (dozens). munmap skips the holes.
Status AddressSpaceBuilder::unmap_inherited() {
  CKPT_ASSIGN(auto child_maps, proc::read_maps(pid_));
  CallBatch calls = batch();
  uint64_t from = 0, to = 0;  // the stretch so far
  auto flush = [&] {
    if (to > from) calls.add("unmapping inherited memory", {}, SYS_munmap, from, to - from);
    from = to = 0;
  };
  for (const auto& m : child_maps) {
    if (m.start == tramp_ || m.path == "[vsyscall]" || is_special_name(m.path)) {
      flush();
      continue;
    }
    if (to == 0) from = m.start;
    to = m.end;
  }
  flush();
  return calls.run();
}

Status AddressSpaceBuilder::move_vdso() {
  CKPT_ASSIGN(auto child_maps, proc::read_maps(pid_));
  std::map<std::string, mem::Range> have;
  for (const auto& m : child_maps)
    if (is_special_name(m.path)) have[m.path] = {m.start, m.end - m.start};

  std::map<std::string, mem::Range> want;
  for (const VmaRecord& v : meta_.vmas)
    if (v.is_special()) want[v.name] = {v.start, v.size()};

  if (want.empty()) {  // the checkpointed process had no vdso: drop ours
    for (auto& [name, r] : have) CKPT_TRY(sys("unmapping the vdso", SYS_munmap, r.addr, r.len));
    return {};
  }
  const std::string refuse = "the checkpoint was taken under a different kernel (";
  for (auto& [name, r] : want) {
    auto it = have.find(name);
    if (it == have.end() || it->second.len != r.len)
      return make_error(ENOTSUP, refuse + name + " layout differs): cannot restore on this kernel");
  }
  for (auto& [name, r] : have)
    if (!want.count(name))
      return make_error(ENOTSUP, refuse + name + " is new): cannot restore on this kernel");
  // Same vdso code, or a checkpointed instruction pointer inside it could land mid-instruction.
  const mem::Range& vd = have["[vdso]"];
  if (xxh3(reinterpret_cast<const void*>(vd.addr), vd.len) != meta_.vdso.vdso_hash)
    return make_error(ENOTSUP, refuse + "vdso code differs): cannot restore on this kernel");

  // Move through a scratch area so a target never overlaps a current location.
  std::vector<mem::Range> busy = {{tramp_, kTrampolineLen}};
  uint64_t total = 0;
  for (auto& [name, r] : have) {
    busy.push_back(r);
    total += r.len;
  }
  for (const VmaRecord& v : meta_.vmas) busy.push_back({v.start, v.size()});
  uint64_t scratch = find_gap(busy, total);
  CallBatch calls = batch();
  for (auto& [name, r] : have) {
    calls.add("moving the vdso", {}, SYS_mremap, r.addr, r.len, r.len,
              MREMAP_MAYMOVE | MREMAP_FIXED, scratch);
    r.addr = scratch;
    scratch += r.len;
  }
  for (auto& [name, r] : have)
    calls.add("moving the vdso", {}, SYS_mremap, r.addr, r.len, r.len,
              MREMAP_MAYMOVE | MREMAP_FIXED, want[name].addr);
  return calls.run();
}

Status AddressSpaceBuilder::map_vmas() {
  const auto& vmas = meta_.vmas;
  // Which VMAs receive content (so must be writable while it is copied in).
  std::vector<bool> gets_content(vmas.size(), false);
  if (!chain_) {  // layout only: any readable private mapping may get content
    // (PROT_NONE ones, often large reservations, stay uncharged: content
    // there makes the caller fall back to a plain restore)
    for (size_t i = 0; i < vmas.size(); ++i) gets_content[i] = layout_may_get_content(vmas[i]);
  } else {
    // The newest generation's pages were taken from this very layout.
    for (const image::PageRun& run : chain_->links.front()->runs()) {
      const VmaRecord* v = image::vma_holding(vmas, run.vaddr, run.bytes());
      if (!v || v->is_special())
        return make_error(EBADMSG, "image has pages at " + hex(run.vaddr) +
                                       " outside its mappings (corrupt metadata)");
    }
    size_t vi = 0;
    for (const image::PlanSlice& sl : plan_->slices) {
      while (vmas[vi].end <= sl.vaddr) ++vi;
      gets_content[vi] = true;
    }
  }

  // The files first (their descriptors go into the mmaps), then the
  // mappings, closes and advice: two round trips (restore/call_batch).
  struct Planned {
    size_t vma;
    uint32_t prot;
    bool sysv;
    const std::string* file;  // null: anonymous
    int oflags;
    int sysv_id;
  };
  std::vector<Planned> planned;
  std::map<std::pair<std::string, int>, size_t> opens;  // (path, flags) -> call index
  CallBatch open_calls = batch();
  for (size_t i = 0; i < vmas.size(); ++i) {
    const VmaRecord& v = vmas[i];
    if (v.is_special() || (!only_.empty() && !only_[i])) continue;
    bool shared = v.flags & image::kVmaShared;
    uint32_t prot = v.prot;
    if (gets_content[i] && !(prot & PROT_WRITE)) {
      prot |= PROT_WRITE;
      extra_write_.push_back(int(i));
    }
    const std::optional<image::SharedObject> object = v.shared_object();
    const std::string* object_path = nullptr;
    if (object && shared_)
      if (auto it = shared_->find(*object); it != shared_->end()) object_path = &it->second;
    if ((v.flags & image::kVmaSysv) && object_path) {
      // The restorer made the segment again: attach it here (shmat, not
      // mmap, so it is an attachment that shmdt(2) finds).
      planned.push_back(
          {i, prot, true, nullptr, 0, std::atoi(object_path->c_str() + 5)});  // "sysv:ID"
      continue;
    }
    const bool shared_anon = shared && object_path;
    if (!v.is_file() && !shared_anon) {
      planned.push_back({i, prot, false, nullptr, 0, 0});
      continue;
    }
    const std::string& file = shared_anon ? *object_path : v.name;
    int oflags = shared_anon ? O_RDWR : (shared && (v.prot & PROT_WRITE)) ? O_RDWR : O_RDONLY;
    auto key = std::make_pair(file, oflags);
    if (!opens.count(key)) {
      auto path = open_calls.add_string(file);
      if (!path.ok()) return path.error().context(where_of(v));
      opens[key] = open_calls.add("opening mapped file", where_of(v), SYS_openat,
                                  uint64_t(AT_FDCWD), *path, uint64_t(oflags | O_CLOEXEC));
    }
    planned.push_back({i, prot, false, &file, oflags, 0});
  }
  CKPT_TRY(open_calls.run());

  CallBatch calls = batch();
  std::vector<size_t> mapped;  // call index per planned mapping
  for (const Planned& p : planned) {
    const VmaRecord& v = vmas[p.vma];
    if (p.sysv) {
      const uint64_t f = SHM_REMAP | ((p.prot & PROT_WRITE) ? 0 : SHM_RDONLY) |
                         ((p.prot & PROT_EXEC) ? SHM_EXEC : 0);
      mapped.push_back(calls.add("shmat", where_of(v), SYS_shmat, uint64_t(p.sysv_id), v.start, f));
      continue;
    }
    uint64_t flags = MAP_FIXED | ((v.flags & image::kVmaShared) ? MAP_SHARED : MAP_PRIVATE);
    long fd = -1;
    if (p.file) {
      fd = open_calls.result(opens[{*p.file, p.oflags}]);
    } else {
      flags |= MAP_ANONYMOUS;
      if (v.flags & image::kVmaGrowsDown) flags |= MAP_GROWSDOWN;
    }
    mapped.push_back(calls.add("mmap", where_of(v), SYS_mmap, v.start, v.size(), p.prot, flags,
                               uint64_t(fd), v.pgoff));
  }
  for (auto& [key, call] : opens) calls.add_may_fail(SYS_close, uint64_t(open_calls.result(call)));
  std::vector<AdviceCall> advice;
  for (const Planned& p : planned)
    if (vmas[p.vma].advice) add_advice(calls, vmas[p.vma], &advice);
  CKPT_TRY(calls.run());
  for (size_t k = 0; k < planned.size(); ++k) {
    const VmaRecord& v = vmas[planned[k].vma];
    if (uint64_t(calls.result(mapped[k])) != v.start)
      return make_error(EFAULT,
                        where_of(v) + ": landed at " + hex(uint64_t(calls.result(mapped[k]))));
  }
  return check_advice(calls, advice);
}

// Before the content is written, so that huge-page advice gets huge pages
// from the first fault. What changes how the process forks or dumps core must
// come back; performance hints are dropped where this kernel lacks them (no
// transparent huge pages, no KSM), as the kernel itself would on that node.
namespace {

const struct {
  uint32_t bit;
  uint64_t advice;
  bool required;
  const char* name;
} kAdvice[] = {{image::kAdvHugePage, MADV_HUGEPAGE, false, "MADV_HUGEPAGE"},
               {image::kAdvNoHugePage, MADV_NOHUGEPAGE, false, "MADV_NOHUGEPAGE"},
               {image::kAdvDontFork, MADV_DONTFORK, true, "MADV_DONTFORK"},
               {image::kAdvWipeOnFork, MADV_WIPEONFORK, true, "MADV_WIPEONFORK"},
               {image::kAdvDontDump, MADV_DONTDUMP, true, "MADV_DONTDUMP"},
               {image::kAdvMergeable, MADV_MERGEABLE, false, "MADV_MERGEABLE"},
               {image::kAdvSequential, MADV_SEQUENTIAL, true, "MADV_SEQUENTIAL"},
               {image::kAdvRandom, MADV_RANDOM, true, "MADV_RANDOM"}};

}  // namespace

void AddressSpaceBuilder::add_advice(CallBatch& calls, const VmaRecord& v,
                                     std::vector<AdviceCall>* optional) {
  for (const auto& a : kAdvice) {
    if (!(v.advice & a.bit)) continue;
    if (a.required)
      calls.add(a.name, where_of(v), SYS_madvise, v.start, v.size(), a.advice);
    else
      optional->push_back(
          {calls.add_may_fail(SYS_madvise, v.start, v.size(), a.advice), a.name, &v});
  }
}

// Performance hints this kernel lacks fail with EINVAL: dropped, as the
// kernel itself would on this node. Any other failure is an error.
Status AddressSpaceBuilder::check_advice(const CallBatch& calls,
                                         const std::vector<AdviceCall>& optional) {
  for (const AdviceCall& a : optional) {
    const long r = calls.result(a.call);
    if (proc::is_syscall_error(r) && r != -EINVAL)
      return sys_error(a.name, int(-r)).context(where_of(*a.vma));
  }
  return {};
}

namespace {

// Content is copied in batches of plan slices: one iovec pair per slice, at
// most 1024 (the iovec limit) and about 16 MiB per process_vm_writev.
struct WriteBatch {
  size_t first = 0, last = 0;  // slices [first, last)
};

std::vector<WriteBatch> make_write_batches(const std::vector<image::PlanSlice>& slices) {
  constexpr uint64_t kBatchBytes = 16 << 20;
  std::vector<WriteBatch> out;
  uint64_t bytes = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    if (out.empty() || i - out.back().first == 1024 || bytes >= kBatchBytes) {
      out.push_back({i, i});
      bytes = 0;
    }
    out.back().last = i + 1;
    bytes += uint64_t(slices[i].npages) * kPageSize;
  }
  return out;
}

}  // namespace

Status AddressSpaceBuilder::write_content(const ProgressFn& progress, MemoryStats* stats) {
  const auto& vmas = meta_.vmas;
  const auto& slices = plan_->slices;
  // Zero slices need writing only over file pages (anonymous memory starts zeroed).
  auto content = [&](const image::PlanSlice& sl) {
    return chain_->links[sl.link]->content(*sl.run) + uint64_t(sl.first_page) * kPageSize;
  };

  // No byte reaches the process before its whole run's checksum matched.
  // Plain runs are checked by the writer just before it copies them;
  // compressed ones by other threads, batches ahead, as they are decoded.
  const std::vector<WriteBatch> batches = make_write_batches(slices);
  // A compressed run's decompressed content (kept by its reader once
  // verified) is freed after the last batch that copies from it.
  std::map<const image::PageRun*, size_t> last_use;
  for (size_t b = 0; b < batches.size(); ++b)
    for (size_t i = batches[b].first; i < batches[b].last; ++i)
      if (!slices[i].zero() && slices[i].run->compressed()) last_use[slices[i].run] = b;
  // Compressed runs are decoded while they are checked: more workers.
  bool compressed = false;
  for (const image::PlanSlice& sl : slices)
    compressed = compressed || (!sl.zero() && sl.run->compressed());
  unsigned workers =
      compressed ? std::max(2u, std::min(4u, std::thread::hardware_concurrency())) : 1;
  std::vector<std::set<const image::PageRun*>> checked(workers);  // a run may feed several batches
  // The page file's pages of batch b: read ahead for the next batch, page
  // tables of this one filled in one call rather than one fault per 64 KiB
  // as the check and the copy touch them (a fault is costly in a VM with
  // shadow page tables: docs/performance.md, "io_uring for the page file").
  auto prepare = [&](size_t b) {
    if (b + 1 < batches.size())
      for (size_t i = batches[b + 1].first; i < batches[b + 1].last; ++i)
        if (!slices[i].zero() && !slices[i].run->compressed())  // a frame: read when verified
          ::madvise(const_cast<uint8_t*>(content(slices[i])),
                    uint64_t(slices[i].npages) * kPageSize, MADV_WILLNEED);
    for (size_t i = batches[b].first; i < batches[b].last; ++i)
      if (!slices[i].zero() && !slices[i].run->compressed())
        ::madvise(const_cast<uint8_t*>(content(slices[i])), uint64_t(slices[i].npages) * kPageSize,
                  MADV_POPULATE_READ);  // EINVAL before Linux 5.14: the faults as before
  };
  // Plain content is checked by the writer itself, run by run, just before
  // it copies the run: the run (at most 1 MiB) is still in the CPU's cache
  // for the copy, which a checker running batches ahead left to memory.
  const bool fused = !compressed;
  std::optional<BatchVerifier> verifier;
  if (!fused)
    verifier.emplace(batches.size(), workers, 4, [&](size_t b, unsigned t) -> Status {
      prepare(b);
      for (size_t i = batches[b].first; i < batches[b].last; ++i)
        if (checked[t].insert(slices[i].run).second)
          CKPT_TRY(chain_->links[slices[i].link]->verify_run(*slices[i].run));
      return {};
    });

  uint64_t total = 0;
  for (const image::PlanSlice& sl : slices)
    if (!sl.zero()) total += uint64_t(sl.npages) * kPageSize;
  // One writer's part: batches first, first + step, ... Its own VMA cursor
  // and counts; the pages are the new process's, faulted in by the write.
  struct Part {
    Status st;
    MemoryStats counts;
    uint64_t done = 0;                     // content bytes copied
    std::set<const image::PageRun*> runs;  // checked by this writer (fused)
  };
  std::atomic<bool> failed{false};  // one writer's failure ends the other's part
  // Anonymous memory without huge pages is filled by UFFDIO_COPY (no zeroing first).
  const UffdFill fill(
      pid_, [&](long nr, uint64_t a1) { return rs_.call(nr, a1); },
      UffdFill::eligible(vmas, UffdFill::thp_mode()));
  auto write_part = [&](size_t first, size_t step, Part* part, bool report) {
    std::vector<iovec> local, remote;
    size_t vi = 0;
    auto written = [&](size_t b) {  // the checkers' window moves on
      if (verifier) verifier->written(b);
    };
    for (size_t b = first; b < batches.size() && !failed; b += step) {
      if (fused) prepare(b);
      if (Status st = fused ? Status{} : verifier->wait(b); !st.ok()) {
        part->st = st;
        failed = true;
        return;
      }
      local.clear();
      remote.clear();
      ssize_t want = 0;
      for (size_t i = batches[b].first; i < batches[b].last; ++i) {
        const image::PlanSlice& sl = slices[i];
        const uint64_t len = uint64_t(sl.npages) * kPageSize;
        while (vmas[vi].end <= sl.vaddr) ++vi;
        const uint8_t* src;
        if (sl.zero()) {
          part->counts.pages_zero += sl.npages;
          if (!vmas[vi].is_file()) continue;
          src = zero_bytes();
        } else {
          src = content(sl);
          part->counts.bytes_read += len;
          part->done += len;
          if (fused && part->runs.insert(sl.run).second) {
            if (Status st = chain_->links[sl.link]->verify_run(*sl.run); !st.ok()) {
              part->st = st;
              failed = true;
              return;
            }
          }
        }
        part->counts.pages_written += sl.npages;
        if (!sl.zero() && fill.covers(sl.vaddr, len)) {
          if (Status st = fill.copy(sl.vaddr, src, len); !st.ok()) {
            part->st = st;
            failed = true;
            written(b);
            return;
          }
          continue;
        }
        local.push_back(iovec{const_cast<uint8_t*>(src), len});
        remote.push_back(iovec{reinterpret_cast<void*>(sl.vaddr), len});
        want += ssize_t(len);
      }
      if (!local.empty()) {
        ssize_t n =
            ::process_vm_writev(pid_, local.data(), local.size(), remote.data(), remote.size(), 0);
        if (n != want) {
          part->st = n < 0 ? sys_error("writing memory into the new process")
                           : make_error(EFAULT, "short write into the new process");
          failed = true;
          written(b);  // the window moves on for a writer waiting on a check
          return;
        }
        if (report && progress) progress(std::min(total, part->done * step), total);  // about
      }
      for (size_t i = batches[b].first; i < batches[b].last && !last_use.empty(); ++i) {
        auto it = last_use.find(slices[i].run);
        if (it != last_use.end() && it->second == b)
          chain_->links[slices[i].link]->drop_content(*slices[i].run);
      }
      written(b);
    }
  };
  // A second writer takes every other batch when there is a CPU for it and
  // no compressed content (whose decoded copy is freed after its last batch,
  // which a writer running behind could still be reading): faulting in the
  // new process's memory is most of a restore on a VM (clearing fresh pages),
  // and faults in different places of one process proceed in parallel.
  const bool two =
      last_use.empty() && batches.size() > 1 && std::thread::hardware_concurrency() >= 2;
  Part parts[2];
  if (two) {
    std::thread second([&] { write_part(1, 2, &parts[1], false); });
    write_part(0, 2, &parts[0], true);
    second.join();
  } else {
    write_part(0, 1, &parts[0], true);
  }
  for (const Part& p : parts) {
    stats->pages_zero += p.counts.pages_zero;
    stats->bytes_read += p.counts.bytes_read;
    stats->pages_written += p.counts.pages_written;
  }
  if (progress && parts[0].st.ok() && parts[1].st.ok()) progress(total, total);
  return parts[0].st.ok() ? parts[1].st : parts[0].st;
}

Status AddressSpaceBuilder::restore_protections() {
  CallBatch calls = batch();
  for (int i : extra_write_) {
    const VmaRecord& v = meta_.vmas[size_t(i)];
    calls.add("restoring protection", {}, SYS_mprotect, v.start, v.size(), v.prot);
  }
  return calls.run();
}

// Done while nothing is mapped: the kernel refuses to switch the executable
// while the old one is still mapped, and the old one (this very program) may
// be the image's own executable too.
Status AddressSpaceBuilder::set_mm_fields() {
  const image::MmRecord& mm = meta_.mm;
  auto exe_path = put_data(mm.exe_path.c_str(), mm.exe_path.size() + 1);
  if (!exe_path.ok()) return exe_path.error();
  CKPT_ASSIGN(long exe_fd, sys(("opening executable " + mm.exe_path).c_str(), SYS_openat,
                               uint64_t(AT_FDCWD), *exe_path, uint64_t(O_RDONLY | O_CLOEXEC)));
  Status st = set_mm_map(uint32_t(exe_fd));
  (void)rs_.call(SYS_close, uint64_t(exe_fd));
  return st;
}

Status AddressSpaceBuilder::set_mm_map(uint32_t exe_fd) {
  const image::MmRecord& mm = meta_.mm;
  // Layout in the data page: [prctl_mm_map][auxv words].
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
  map.exe_fd = exe_fd;
  size_t auxv_bytes = std::min<size_t>(mm.auxv.size() * 8, kPageSize - sizeof map);
  if (auxv_bytes) {
    CKPT_ASSIGN(uint64_t auxv_addr, put_data(mm.auxv.data(), auxv_bytes, sizeof map));
    map.auxv = reinterpret_cast<__u64*>(auxv_addr);
    map.auxv_size = uint32_t(auxv_bytes);
  }
  CKPT_ASSIGN(uint64_t map_addr, put_data(&map, sizeof map));
  auto r = sys("setting the mm fields (PR_SET_MM_MAP)", SYS_prctl, PR_SET_MM, PR_SET_MM_MAP,
               map_addr, sizeof map);
  // The kernel asks for the capability only to change the executable link.
  if (!r.ok() && r.error().code == EPERM && exe_fd != uint32_t(-1))
    return make_error(EPERM,
                      "setting the executable link (/proc/PID/exe) of the new process needs "
                      "CAP_CHECKPOINT_RESTORE or root");
  if (!r.ok()) return r.error();
  return {};
}

Status AddressSpaceBuilder::build_layout() {
  CKPT_TRY(map_trampoline());
  CKPT_TRY(unmap_inherited());
  CKPT_TRY(move_vdso());
  CKPT_TRY(set_mm_fields());
  return map_vmas();
}

Status AddressSpaceBuilder::build(const ProgressFn& progress, MemoryStats* stats,
                                  const LogFn* log) {
  if (!chain_) return make_error(EINVAL, "a layout-only builder has no content to write");
  PhaseTrace pt("build", log);
  CKPT_TRY(build_layout());
  pt.mark("layout");
  CKPT_TRY(write_content(progress, stats));
  pt.mark("content");
  return restore_protections();
}

}  // namespace ckpt::restore
