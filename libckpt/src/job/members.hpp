// What a frozen job's members share and how they relate, as a checkpoint
// records it: which member saves each shared memory object, the open file
// descriptions members share, the terminals they control, job.img.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <map>
#include <vector>

#include "dump/member.hpp"
#include "image/job_image.hpp"
#include "image/model.hpp"
#include "proc/tree.hpp"

namespace ckpt::job {

// Shared memory objects (shared anonymous memory, SysV segments, deleted
// files mapped shared) and the first member mapping each: that member saves
// the content, the others only map it.
using SharedOwners = std::map<image::SharedObject, pid_t>;
SharedOwners shared_memory_owners(const std::vector<proc::Member>& members);

// Whether `pid` is a live (not zombie) member.
bool frozen_has(const std::vector<proc::Member>& members, pid_t pid);

// The job's ptys that are controlling terminals must come back as such: their
// session leaders and foreground groups must be members.
Status check_terminals(const std::vector<proc::Member>& members,
                       const std::vector<dump::MemberDump*>& dumps);

// Descriptors of a member that are the same open file description as one of
// an earlier member (inherited at fork, or passed): kcmp across processes.
std::vector<image::JobShare> find_shared_files(const std::vector<dump::MemberDump*>& dumps);

// job.img's content for `members` (the root first; `tree`: a --tree job),
// its members' digests still unset.
image::JobMeta job_meta(const std::vector<proc::Member>& members, bool tree, uint64_t generation,
                        const std::array<uint8_t, 16>& chain_id);

}  // namespace ckpt::job
