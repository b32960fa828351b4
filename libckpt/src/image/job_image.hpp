// job.img: which processes a generation holds and how they relate. Each
// member's own state is an ordinary three-file snapshot: the root's at the
// top of the generation directory (so a job of one looks exactly like the
// single-process images of format version 1), every other member's in
// `member-PID/`. A generation without job.img is a job of one.
#pragma once

#include <sys/types.h>

#include <array>
#include <ckpt/result.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "image/format.hpp"

namespace ckpt::image {

constexpr Magic kJobMagic = {0x89, 'C', 'K', 'P', 'T', 'J', '\r', '\n'};
constexpr const char* kJobFile = "job.img";

// JobMember::flags bits.
enum JobMemberFlag : uint32_t {
  kMemberZombie = 1u << 0,  // exited, not reaped: restored as a zombie with `exit_status`
  kMemberTree = 1u << 1,    // on the root: the job is its whole tree (cr_full --tree)
  // In a session whose leader has a controlling terminal, without one itself
  // (it gave it up with TIOCNOTTY): it drops the one it inherits at restore.
  kMemberNoCtty = 1u << 2,
};

struct JobMember {
  int32_t pid = 0, ppid = 0, pgid = 0, sid = 0;
  uint32_t flags = 0;
  int32_t exit_status = 0;  // zombies: the wait status
  // xxh3 of the member's whole meta.img; 0 for the root (its meta.img binds
  // job.img instead), zombies, and in job.img files written before it.
  uint64_t meta_digest = 0;
  bool zombie() const { return flags & kMemberZombie; }
};

// fd `fd` of member `pid` is the same open file description as fd
// `owner_fd` of the earlier member `owner_pid` (inherited at fork, or
// passed): restored as one, sharing offset and flags.
struct JobShare {
  int32_t pid = 0, fd = 0, owner_pid = 0, owner_fd = 0;
};

struct JobMeta {
  uint64_t generation = 0;
  std::array<uint8_t, 16> chain_id{};
  std::vector<JobMember> members;  // pre-order: members[0] is the root, parents before children
  std::vector<JobShare> shares;
  // Read from a job.img: xxh3 of the whole file. false: a generation without
  // one, described from its root's metadata (a job of one).
  bool from_file = false;
  uint64_t file_digest = 0;

  // Whether `pid` is one of the members: a group or session comes back only
  // where its leader is (restore makes it; cr_info marks the others).
  bool has_member(pid_t pid) const {
    for (const JobMember& m : members)
      if (m.pid == pid) return true;
    return false;
  }
};

// Where member `pid`'s three files are inside generation directory `gen_dir`.
std::string member_dir(const std::string& gen_dir, pid_t pid, pid_t root);

// Writes gen_dir/job.img (O_EXCL, 0600, fsynced unless !durable); *digest:
// xxh3 of the whole file, which the root's chain link binds.
Status write_job_file(const std::string& gen_dir, const JobMeta& job, bool durable = true,
                      uint64_t* digest = nullptr);
// Reads and checks gen_dir/job.img. ENOENT when the generation has none
// (a job of one: its root is the snapshot at the top).
Result<JobMeta> read_job_file(const std::string& gen_dir);

}  // namespace ckpt::image
