#include "proc/credentials.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "proc/status.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::proc {

namespace {

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif
constexpr size_t kAffinityBytes = 1024;  // 8192 CPUs

bool four_ids(const std::string& status, const char* key, std::array<uint32_t, 4>* ids) {
  std::string v;
  if (!status_field(status, key, &v)) return false;
  std::istringstream in(v);
  for (uint32_t& id : *ids)
    if (!(in >> id)) return false;
  return true;
}

// The first NUMA policy in a numa_maps text that is not "default", or "".
std::string numa_policy(const std::string& text, std::string* where) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string addr, policy;
    if (!(l >> addr >> policy) || policy == "default") continue;
    *where = addr;
    return policy;
  }
  return {};
}

// The memory policy of the thread (numa_maps shows it on every mapping
// without a policy of its own) and of its mappings. `first_only`: the
// thread's policy is enough (a non-leader: the mappings are the leader's).
Status refuse_memory_policy(pid_t pid, pid_t tid, bool first_only) {
  const std::string path = proc_path(pid, "task/") + std::to_string(tid) + "/numa_maps";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return {};  // a kernel without NUMA: no memory policy to lose
  std::string text;
  char buf[65536];
  ssize_t n;
  // The kernel walks page tables to print each line: a non-leader's first
  // lines are enough.
  while ((n = ::read(fd.get(), buf, first_only ? 512 : sizeof buf)) > 0) {
    text.append(buf, size_t(n));
    if (first_only) break;
  }
  if (n < 0) return sys_error("reading " + path);
  if (first_only && text.find('\n') != std::string::npos) text.resize(text.find('\n'));
  std::string where, policy = numa_policy(text, &where);
  if (policy.empty()) return {};
  return make_error(ENOTSUP, "thread " + std::to_string(tid) + ": NUMA memory policy \"" + policy +
                                 "\" (on the mapping at 0x" + where + "): not supported");
}

// Fields of /proc/.../status for state that is not restored: refused when
// they differ from what every new process has.
Status refuse_unrestored(const std::string& status, pid_t tid) {
  const std::string who = "thread " + std::to_string(tid) + ": ";
  std::string v;
  if (status_field(status, "THP_enabled", &v) && std::atoi(v.c_str()) == 0)
    return make_error(ENOTSUP, who + "transparent huge pages disabled by prctl: not supported");
  if (status_field(status, "Speculation_Store_Bypass", &v) && v.find("thread") != std::string::npos)
    return make_error(ENOTSUP,
                      who + "speculation control (store bypass) set by prctl: not supported");
  if (status_field(status, "SpeculationIndirectBranch", &v) &&
      v.find("conditional") != std::string::npos && v.find("enabled") == std::string::npos)
    return make_error(ENOTSUP,
                      who + "speculation control (indirect branch) set by prctl: not supported");
  if (status_field(status, "x86_Thread_features", &v) &&
      v.find_first_not_of(" \t") != std::string::npos)
    return make_error(ENOTSUP, who + "x86 thread features (shadow stack):" + v + ": not supported");
  if (status_field(status, "untag_mask", &v) && std::strtoull(v.c_str(), nullptr, 16) != ~0ull)
    return make_error(ENOTSUP, who + "linear address masking: not supported");
  return {};
}

// The number of online NUMA nodes (0 if unknown).
int online_nodes() {
  auto text = read_file("/sys/devices/system/node/online");
  if (!text.ok()) return 0;
  int n = 0;
  std::istringstream in(*text);
  for (std::string part; std::getline(in, part, ',');) {
    int a = 0, b = 0;
    if (std::sscanf(part.c_str(), "%d-%d", &a, &b) == 2)
      n += b - a + 1;
    else if (std::sscanf(part.c_str(), "%d", &a) == 1)
      ++n;
  }
  return n;
}

Status read_scheduling(pid_t tid, image::TaskCredentials* c) {
  const std::string who = "thread " + std::to_string(tid) + ": ";
  int policy = ::sched_getscheduler(tid);
  if (policy < 0) return sys_error(who + "sched_getscheduler");
  if ((policy & ~SCHED_RESET_ON_FORK) == SCHED_DEADLINE)
    return make_error(ENOTSUP, who + "SCHED_DEADLINE scheduling: not supported");
  c->sched_policy = policy;
  sched_param sp{};
  if (::sched_getparam(tid, &sp) != 0) return sys_error(who + "sched_getparam");
  c->sched_priority = sp.sched_priority;
  errno = 0;
  int nice = ::getpriority(PRIO_PROCESS, id_t(tid));
  if (nice == -1 && errno != 0) return sys_error(who + "getpriority");
  c->nice = nice;
  std::vector<uint64_t> mask(kAffinityBytes / 8);
  long n = ::syscall(SYS_sched_getaffinity, tid, kAffinityBytes, mask.data());
  if (n < 0) return sys_error(who + "sched_getaffinity");
  mask.resize(size_t(n) / 8);
  while (!mask.empty() && mask.back() == 0) mask.pop_back();
  c->affinity = std::move(mask);
  return {};
}

}  // namespace

Status parse_status_credentials(const std::string& status, image::TaskCredentials* c) {
  if (!four_ids(status, "Uid", &c->uid) || !four_ids(status, "Gid", &c->gid))
    return make_error(EIO, "status: no Uid/Gid lines");
  std::string groups;
  if (!status_field(status, "Groups", &groups)) return make_error(EIO, "status: no Groups line");
  std::istringstream in(groups);
  c->groups.clear();
  for (uint32_t g; in >> g;) c->groups.push_back(g);
  if (!status_hex(status, "CapInh", &c->cap_inheritable) ||
      !status_hex(status, "CapPrm", &c->cap_permitted) ||
      !status_hex(status, "CapEff", &c->cap_effective) ||
      !status_hex(status, "CapBnd", &c->cap_bounding))
    return make_error(EIO, "status: no capability lines");
  // CapAmb since Linux 4.3, NoNewPrivs since 4.10: absent means none.
  if (!status_hex(status, "CapAmb", &c->cap_ambient)) c->cap_ambient = 0;
  std::string nnp;
  c->flags &= ~uint32_t(image::kCredNoNewPrivs);
  if (status_field(status, "NoNewPrivs", &nnp) && std::atoi(nnp.c_str()) == 1)
    c->flags |= image::kCredNoNewPrivs;
  return {};
}

Result<std::vector<image::TaskCredentials>> read_credentials(
    pid_t pid, const std::vector<image::ThreadRecord>& threads) {
  std::vector<image::TaskCredentials> out;
  // Mapping policies cost a page-table walk of the whole process (numa_maps:
  // 20-130 ms per GiB here, inside the freeze); on a single-node host they
  // can only name node 0, which is where memory goes anyway, so only the
  // threads' own policies are checked there (docs/security.md).
  const bool one_node = online_nodes() == 1;
  for (const image::ThreadRecord& t : threads) {
    image::TaskCredentials c;
    c.tid = t.tid;
    const std::string path = proc_path(pid, "task/") + std::to_string(t.tid) + "/status";
    CKPT_ASSIGN(std::string status, read_file(path));
    Status st = parse_status_credentials(status, &c);
    if (!st.ok()) return st.error().context(path);
    CKPT_TRY(refuse_unrestored(status, t.tid));
    CKPT_TRY(read_scheduling(t.tid, &c));
    CKPT_TRY(refuse_memory_policy(pid, t.tid, t.tid != pid || one_node));
    out.push_back(std::move(c));
  }
  return out;
}

bool credentials_need_securebits(const std::vector<image::TaskCredentials>& creds) {
  for (const image::TaskCredentials& c : creds) {
    for (uint32_t id : c.uid)
      if (id == 0) return true;
    if (c.cap_permitted | c.cap_effective | c.cap_inheritable | c.cap_ambient) return true;
  }
  return false;
}

}  // namespace ckpt::proc
