#include "migrate/landlock.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "util/fd.hpp"

namespace ckpt::migrate {

namespace {

// Debian 12's uapi headers predate most of Landlock: the ABI, spelled out.
constexpr long kCreateRuleset = 444, kAddRule = 445, kRestrictSelf = 446;
constexpr uint32_t kCreateRulesetVersion = 1u << 0;
constexpr int kRulePathBeneath = 1;

struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};
struct __attribute__((packed)) PathBeneathAttr {
  uint64_t allowed_access;
  int32_t parent_fd;
};

// Filesystem rights by ABI version.
uint64_t fs_rights(int abi) {
  uint64_t r = (1ull << 13) - 1;  // ABI 1: execute .. make_sym
  if (abi >= 2) r |= 1ull << 13;  // refer
  if (abi >= 3) r |= 1ull << 14;  // truncate
  if (abi >= 5) r |= 1ull << 15;  // ioctl on devices
  return r;
}
constexpr uint64_t kExecute = 1ull << 0, kMakeChar = 1ull << 6, kMakeBlock = 1ull << 11;

}  // namespace

int landlock_abi() {
  long v = ::syscall(kCreateRuleset, nullptr, 0, kCreateRulesetVersion);
  return v < 0 ? 0 : int(v);
}

Result<bool> landlock_confine(const std::string& dir) {
  const int abi = landlock_abi();
  if (abi <= 0) return false;
  RulesetAttr attr{};
  attr.handled_access_fs = fs_rights(abi);
  if (abi >= 4) attr.handled_access_net = 3;  // bind and connect TCP
  if (abi >= 6) attr.scoped = 3;              // abstract unix sockets, signals
  UniqueFd ruleset(int(::syscall(kCreateRuleset, &attr, sizeof attr, 0)));
  if (!ruleset.valid()) return sys_error("creating a Landlock ruleset");
  if (!dir.empty()) {
    UniqueFd d(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!d.valid()) return sys_error("opening " + dir + " for Landlock");
    PathBeneathAttr pb{};
    pb.allowed_access = fs_rights(abi) & ~(kExecute | kMakeChar | kMakeBlock);
    pb.parent_fd = d.get();
    if (::syscall(kAddRule, ruleset.get(), kRulePathBeneath, &pb, 0) != 0)
      return sys_error("adding " + dir + " to the Landlock ruleset");
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return sys_error("PR_SET_NO_NEW_PRIVS");
  if (::syscall(kRestrictSelf, ruleset.get(), 0) != 0) return sys_error("applying Landlock");
  return true;
}

}  // namespace ckpt::migrate
