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
#include "restore/content_writer.hpp"
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

  // What the checkpointed process had unmapped (a program under valgrind
  // drops the vdso and keeps its data pages) goes here too.
  for (auto it = have.begin(); it != have.end();) {
    if (want.count(it->first) || (it->first != "[vdso]" && !want.empty())) {
      ++it;
      continue;
    }
    CKPT_TRY(sys("unmapping the vdso", SYS_munmap, it->second.addr, it->second.len));
    it = have.erase(it);
  }
  if (want.empty()) return {};
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
  const mem::Range& vd = have.count("[vdso]") ? have["[vdso]"] : mem::Range{};
  if (vd.len && xxh3(reinterpret_cast<const void*>(vd.addr), vd.len) != meta_.vdso.vdso_hash)
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
  CKPT_ASSIGN(std::vector<bool> gets_content, content_targets());
  // The files first (their descriptors go into the mmaps), then the
  // mappings, closes and advice: two round trips (restore/call_batch).
  std::vector<PlannedMap> planned;
  OpenCalls opens;
  CallBatch open_calls = batch();
  CKPT_TRY(plan_maps(gets_content, &planned, &opens, open_calls));
  CKPT_TRY(open_calls.run());
  return make_maps(planned, opens, open_calls);
}

Result<std::vector<bool>> AddressSpaceBuilder::content_targets() const {
  const auto& vmas = meta_.vmas;
  std::vector<bool> gets_content(vmas.size(), false);
  if (!chain_) {  // layout only: any readable private mapping may get content
    // (PROT_NONE ones, often large reservations, stay uncharged: content
    // there makes the caller fall back to a plain restore)
    for (size_t i = 0; i < vmas.size(); ++i) gets_content[i] = layout_may_get_content(vmas[i]);
    return gets_content;
  }
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
  return gets_content;
}

Status AddressSpaceBuilder::plan_maps(const std::vector<bool>& gets_content,
                                      std::vector<PlannedMap>* planned, OpenCalls* opens,
                                      CallBatch& open_calls) {
  const auto& vmas = meta_.vmas;
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
      planned->push_back(
          {i, prot, true, nullptr, 0, std::atoi(object_path->c_str() + 5)});  // "sysv:ID"
      continue;
    }
    const bool shared_anon = shared && object_path;
    if (!v.is_file() && !shared_anon) {
      planned->push_back({i, prot, false, nullptr, 0, 0});
      continue;
    }
    const std::string& file = shared_anon ? *object_path : v.name;
    int oflags = shared_anon ? O_RDWR : (shared && (v.prot & PROT_WRITE)) ? O_RDWR : O_RDONLY;
    auto key = std::make_pair(file, oflags);
    if (!opens->count(key)) {
      auto path = open_calls.add_string(file);
      if (!path.ok()) return path.error().context(where_of(v));
      (*opens)[key] = open_calls.add("opening mapped file", where_of(v), SYS_openat,
                                     uint64_t(AT_FDCWD), *path, uint64_t(oflags | O_CLOEXEC));
    }
    planned->push_back({i, prot, false, &file, oflags, 0});
  }
  return {};
}

Status AddressSpaceBuilder::make_maps(const std::vector<PlannedMap>& planned,
                                      const OpenCalls& opens, const CallBatch& open_calls) {
  const auto& vmas = meta_.vmas;
  CallBatch calls = batch();
  std::vector<size_t> mapped;  // call index per planned mapping
  for (const PlannedMap& p : planned) {
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
      fd = open_calls.result(opens.at({*p.file, p.oflags}));
    } else {
      flags |= MAP_ANONYMOUS;
      if (v.flags & image::kVmaGrowsDown) flags |= MAP_GROWSDOWN;
    }
    mapped.push_back(calls.add("mmap", where_of(v), SYS_mmap, v.start, v.size(), p.prot, flags,
                               uint64_t(fd), v.pgoff));
  }
  for (auto& [key, call] : opens) calls.add_may_fail(SYS_close, uint64_t(open_calls.result(call)));
  std::vector<AdviceCall> advice;
  for (const PlannedMap& p : planned)
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

Status AddressSpaceBuilder::write_content(const ProgressFn& progress, MemoryStats* stats) {
  return ContentWriter(pid_, *chain_, *plan_, rs_).write(progress, stats);
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
