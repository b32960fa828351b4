// The madvise() state of each mapping (image::VmaAdvice), read from
// /proc/PID/smaps' VmFlags lines.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <string>
#include <vector>

#include "image/model.hpp"

namespace ckpt::dump {

// Advice bits of the VmFlags line of one smaps entry ("rd wr mr mw me hg").
uint32_t advice_of_vmflags(const std::string& vmflags);

// Sets `advice` on every record of `vmas` from /proc/PID/smaps. smaps walks
// every page table to count resident pages (tens of ms per GiB), so callers
// read it off the frozen path where they can (dump/member.cpp).
Status read_advice(pid_t pid, std::vector<image::VmaRecord>* vmas);

}  // namespace ckpt::dump
