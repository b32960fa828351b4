// Who a thread is and how it is scheduled: credentials (uids, gids,
// supplementary groups, the five capability sets, securebits,
// no_new_privs) and scheduling (policy, priority, nice, CPU affinity).
// Metadata record type 23, one per thread (docs/format.md); an image
// without it was written before libckpt saved credentials (docs/security.md
// says how such an image is restored).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace ckpt::image {

enum CredentialFlag : uint32_t {
  kCredSecurebitsKnown = 1u << 0,  // securebits were read (an injected prctl)
  kCredNoNewPrivs = 1u << 1,
};

struct TaskCredentials {
  int32_t tid = 0;
  uint32_t flags = 0;             // CredentialFlag bits
  std::array<uint32_t, 4> uid{};  // real, effective, saved, filesystem
  std::array<uint32_t, 4> gid{};
  std::vector<uint32_t> groups;  // supplementary groups
  uint64_t cap_inheritable = 0, cap_permitted = 0, cap_effective = 0, cap_bounding = 0,
           cap_ambient = 0;
  uint32_t securebits = 0;     // meaningful with kCredSecurebitsKnown
  int32_t sched_policy = 0;    // SCHED_* | SCHED_RESET_ON_FORK
  int32_t sched_priority = 0;  // real-time priority (0 for the others)
  int32_t nice = 0;
  std::vector<uint64_t> affinity;  // CPU mask, bit N of word N/64 = CPU N

  bool securebits_known() const { return flags & kCredSecurebitsKnown; }
  bool no_new_privs() const { return flags & kCredNoNewPrivs; }
};

}  // namespace ckpt::image
