// Rebuilds a checkpointed address space inside a stopped, traced child by
// making it run system calls (see proc/inject.hpp):
//   1. map a trampoline (code, scratch data, room for batches of calls, a
//      stack) at an address free in both the child and the image;
//   2. unmap everything the child inherited, except the trampoline and the
//      kernel's vdso/vvar, which are moved to their checkpointed addresses;
//   3. set the mm fields and executable (PR_SET_MM_MAP);
//   4. map every VMA of the image (files re-mapped from their paths);
//   5. write page content straight from the images (UFFDIO_COPY into
//      anonymous memory without huge pages: restore/uffd_fill; else process_vm_writev),
//      each page once, from the newest generation that has it (the plan),
//      checking each run's checksum first; then restore protections.
// The trampoline stays until the caller's last call unmaps it.
#pragma once

#include <sys/mman.h>
#include <sys/types.h>

#include <ckpt/ckpt.hpp>
#include <map>
#include <memory>
#include <string>

#include "image/chain.hpp"
#include "proc/inject.hpp"
#include "restore/call_batch.hpp"

namespace ckpt::restore {

struct MemoryStats {
  uint64_t pages_written = 0;
  uint64_t pages_zero = 0;
  uint64_t bytes_read = 0;
};

class AddressSpaceBuilder {
 public:
  // `plan` says which generation of `chain` each page comes from.
  AddressSpaceBuilder(pid_t pid, const image::Chain& chain, const image::RestorePlan& plan,
                      proc::RemoteSyscall& rs)
      : pid_(pid), chain_(&chain), meta_(chain.newest()), plan_(&plan), rs_(rs) {}
  // A builder of `layout` alone, whose content the caller writes as it
  // arrives (migrate/warm_restore, metadata first): every mapping where
  // layout_may_get_content() holds stays writable until restore_protections().
  AddressSpaceBuilder(pid_t pid, const image::ImageMeta& layout, proc::RemoteSyscall& rs)
      : pid_(pid), chain_(nullptr), meta_(layout), plan_(nullptr), rs_(rs) {}

  // Steps 1-5 (a builder of a chain only).
  Status build(const ProgressFn& progress, MemoryStats* stats, const LogFn* log = nullptr);
  // Steps 1-4: the mappings, empty. Content may then be written where
  // layout_may_get_content() holds.
  Status build_layout();
  static bool layout_may_get_content(const image::VmaRecord& v) {
    return !(v.flags & image::kVmaShared) && !v.is_special() && (v.prot & PROT_READ);
  }
  // Start of the trampoline mapping and its length, for the final munmap.
  // Its pages: 0 "syscall; int3", then the batch loop at kBatchCodeOffset;
  // 1 put_data(); 2-3 a batch's call table; 4-6 its strings; 7 a stack for
  // the tasks' calls (restore/tasks, from its top).
  uint64_t trampoline() const { return tramp_; }
  static constexpr uint64_t kTrampolineLen = 8 * 4096;
  static constexpr uint64_t kBatchCodeOffset = 64;
  // Calls run in the child in one round trip (in the trampoline), by the
  // builder's thread or by `rs`'s.
  CallBatch batch();
  CallBatch batch(proc::RemoteSyscall& rs);
  // Copies bytes into the trampoline's data page (4 KiB); returns their remote address.
  Result<uint64_t> put_data(const void* data, size_t len, size_t offset = 0);

  // Pieces also used to roll a live process back in place (pause/).
  // `bare_syscall`: the RemoteSyscall's instruction is a bare "syscall" (a
  // live process's vdso), so the mmap stops at its exit.
  Status map_trampoline(bool bare_syscall = false);
  // Only the VMAs whose index is true are mapped by map_vmas() (default: all).
  void map_only(std::vector<bool> which) { only_ = std::move(which); }
  Status map_vmas();
  // Shared anonymous memory (by its checkpointed inode) is mapped from these
  // paths (a job's members share one object; restore/shared_memory.hpp),
  // not as new private-to-this-process objects.
  void map_shared_from(const image::SharedPaths* objects) { shared_ = objects; }
  Status restore_protections();
  // PR_SET_MM_MAP with the image's mm fields and auxv; `exe_fd` an fd of the
  // executable in the process, or -1 to keep the current one.
  Status set_mm_map(uint32_t exe_fd);
  Result<long> sys(const char* what, long nr, uint64_t a1 = 0, uint64_t a2 = 0, uint64_t a3 = 0,
                   uint64_t a4 = 0, uint64_t a5 = 0, uint64_t a6 = 0);

 private:
  Status unmap_inherited();
  Status move_vdso();
  Status write_content(const ProgressFn& progress, MemoryStats* stats);
  Status set_mm_fields();
  // The mapping's madvise() state (image::VmaAdvice), by madvise calls added
  // to `calls`; those whose failure check_advice judges (hints this kernel
  // may lack) go to `optional`.
  struct AdviceCall {
    size_t call;
    const char* name;
    const image::VmaRecord* vma;
  };
  static void add_advice(CallBatch& calls, const image::VmaRecord& v,
                         std::vector<AdviceCall>* optional);
  static Status check_advice(const CallBatch& calls, const std::vector<AdviceCall>& optional);
  // map_vmas' steps: which VMAs receive content (writable while it is
  // copied in); each mapping planned, the files it maps opened (one call
  // per file and mode); the mappings made, the files closed, the advice set.
  struct PlannedMap {
    size_t vma;
    uint32_t prot;
    bool sysv;
    const std::string* file;  // null: anonymous
    int oflags;
    int sysv_id;
  };
  using OpenCalls = std::map<std::pair<std::string, int>, size_t>;  // (path, flags) -> call
  Result<std::vector<bool>> content_targets() const;
  Status plan_maps(const std::vector<bool>& gets_content, std::vector<PlannedMap>* planned,
                   OpenCalls* opens, CallBatch& open_calls);
  Status make_maps(const std::vector<PlannedMap>& planned, const OpenCalls& opens,
                   const CallBatch& open_calls);

  pid_t pid_;
  const image::Chain* chain_;  // null: layout only
  const image::ImageMeta& meta_;
  const image::RestorePlan* plan_;
  proc::RemoteSyscall& rs_;
  uint64_t tramp_ = 0;
  std::vector<int> extra_write_;  // VMAs mapped writable only for the content copy
  std::vector<bool> only_;
  const image::SharedPaths* shared_ = nullptr;
};

}  // namespace ckpt::restore
