// The flags of a frozen process's mappings (which madvise() advice they
// carry) without /proc/PID/smaps. smaps counts every resident page to print
// them: ~20 ms for 1 GiB of 4 KiB pages, the floor of an incremental's
// freeze. A BPF iterator over the process's VMAs prints each one's start and
// flags without touching a page (~0.05 ms). The program is a dozen
// instructions assembled here, with the field offsets read from the running
// kernel's BTF; the flag bits are checked by a self-test on the tool's own
// memory before they are trusted. Needs root (CAP_BPF and CAP_PERFMON).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ckpt::dump {

struct VmaFlags {
  uint64_t start = 0, flags = 0;  // vm_start, vm_flags
};

// Loads and tests the program (the first time in a tool run: a few ms, and
// the kernel's BTF once per boot): call it before a freeze. False when the
// iterator is not available; `why` says why.
bool vma_flags_available(std::string* why = nullptr);

// The process's VMAs in address order; nullopt where the iterator is not
// available (not root, no BTF, the self-test failed, LIBCKPT_VMA_FLAGS=smaps):
// read smaps then. `why` (optional) says why not.
std::optional<std::vector<VmaFlags>> read_vma_flags(pid_t pid, std::string* why = nullptr);

// image::kAdv* bits of a VMA's kernel flags.
uint32_t advice_of_flags(uint64_t flags);

}  // namespace ckpt::dump
