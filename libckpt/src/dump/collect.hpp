// Gathers a frozen process's state (everything but page content) into the image model.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <vector>

#include "image/model.hpp"
#include "proc/freeze.hpp"
#include "proc/maps.hpp"
#include "proc/signals.hpp"

namespace ckpt::dump {

Status collect_process(pid_t pid, image::ProcessRecord* out);
// VMAs from /proc/PID/maps; refuses mappings that cannot be restored.
Result<std::vector<image::VmaRecord>> collect_vmas(pid_t pid,
                                                   const std::vector<proc::MapEntry>& maps);
// The shared object a mapping shows (as VmaRecord::shared_object() of the
// record collect_vmas makes of it), or none.
std::optional<image::SharedObject> shared_object_of(const proc::MapEntry& m);
Status collect_mm(pid_t pid, const std::vector<image::VmaRecord>& vmas, image::MmRecord* out);
Status collect_vdso(pid_t pid, const std::vector<image::VmaRecord>& vmas, image::VdsoRecord* out);
// `previous`: the newest earlier generation of this process, if any (it says
// which call a thread found inside restart_syscall is really in).
Status collect_threads(const proc::FrozenProcess& fp, const image::ImageMeta* previous,
                       std::vector<image::ThreadRecord>* out);
// The signal masks, and the dispositions they tell by themselves (ignored
// signals); the handlers of the caught ones are read by read_task_states.
Result<proc::SignalMasks> collect_signals(const proc::FrozenProcess& fp,
                                          const image::ThreadRecord& leader,
                                          image::ProcessRecord* out);
// Open file descriptors; refuses kinds that cannot be restored yet, naming the fd.
// `tracker_fd`: the dirty tracker's own userfaultfd in the process, which is
// not the program's and is not saved.
// `job`: the PIDs of the job's members; a pipe they share with `pid` is not
// an outside link (job/shares pairs the ends), one any other process holds is.
// `tcp_outside`: TCP connections whose peer is not in the job are saved
// (kTcpOptOutside) instead of refused.
Status collect_files(pid_t pid, int tracker_fd, std::vector<image::FileRecord>* out,
                     const std::vector<pid_t>& job = {}, bool tcp_outside = false);

}  // namespace ckpt::dump
