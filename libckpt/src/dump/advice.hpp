// The madvise() state of each mapping (image::VmaAdvice): the VMA flags of
// a BPF iterator, or /proc/PID/smaps' VmFlags lines.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "image/model.hpp"

namespace ckpt::dump {

// Advice bits of the VmFlags line of one smaps entry ("rd wr mr mw me hg").
uint32_t advice_of_vmflags(const std::string& vmflags);

// Sets `advice` on every record of `vmas` (sorted by start): from the BPF
// iterator of dump/vma_flags where it is available, else from
// /proc/PID/smaps, which walks every page table to count resident pages
// (tens of ms per GiB), so callers read it beside other work (dump/member.cpp).
Status read_advice(pid_t pid, std::vector<image::VmaRecord>* vmas);
// The smaps way only (tests compare both).
Status read_advice_smaps(pid_t pid, std::vector<image::VmaRecord>* vmas);

}  // namespace ckpt::dump
