#include "dirty/target_uffd.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <set>
#include <string>

#include "dirty/layout.hpp"
#include "dirty/ledger.hpp"
#include "dirty/pagemap_scan.hpp"
#include "proc/inject.hpp"
#include "util/text.hpp"

namespace ckpt::dirty {

using mem::Range;

int register_wp(int uffd, Range r) {
  uffdio_register reg{};
  reg.range.start = r.addr;
  reg.range.len = r.len;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  return ::ioctl(uffd, UFFDIO_REGISTER, &reg) == 0 ? 0 : -errno;
}

Result<UniqueFd> open_pagemap(pid_t pid) {
  UniqueFd pm(::open(proc_path(pid, "pagemap").c_str(), O_RDONLY | O_CLOEXEC));
  if (!pm.valid()) return sys_error("opening " + proc_path(pid, "pagemap"));
  return pm;
}

// Whether the target's `fd` is a userfaultfd we set up (UFFDIO_API done with
// our features, as its fdinfo shows); the reason when it is not.
Status check_target_uffd(pid_t pid, int fd) {
  const std::string what = "fd " + std::to_string(fd);
  char link[256];
  ssize_t n = ::readlink(proc_path(pid, "fd/" + std::to_string(fd)).c_str(), link, sizeof link - 1);
  if (n < 0)
    return errno == ENOENT ? make_error(ENOENT, "the tracker's userfaultfd (" + what +
                                                    ") is gone from the target (closed, or exec)")
                           : sys_error("inspecting the target's " + what);
  if (std::string(link, size_t(n)) != "anon_inode:[userfaultfd]")
    return make_error(ENOENT, "the target's " + what + " is no longer the tracker's userfaultfd");
  CKPT_ASSIGN(std::string info, read_file(proc_path(pid, "fdinfo/" + std::to_string(fd))));
  size_t at = info.find("API:");
  uint64_t api = 0, features = 0;
  if (at == std::string::npos ||
      std::sscanf(info.c_str() + at, "API: %" SCNx64 ":%" SCNx64, &api, &features) != 2 ||
      (features & kFeatures) != kFeatures)
    return make_error(ENOENT,
                      "the target's " + what + " is a userfaultfd the tracker did not set up");
  return {};
}

// A userfaultfd at `fd` on which nobody ever called UFFDIO_API (features 0):
// what a tool killed between creating the tracker's userfaultfd and setting
// it up leaves behind; useless to the program, so a new arm takes its place.
bool is_unset_uffd(pid_t pid, int fd) {
  char link[256];
  ssize_t n = ::readlink(proc_path(pid, "fd/" + std::to_string(fd)).c_str(), link, sizeof link - 1);
  if (n < 0 || std::string(link, size_t(n)) != "anon_inode:[userfaultfd]") return false;
  auto info = read_file(proc_path(pid, "fdinfo/" + std::to_string(fd)));
  if (!info.ok()) return false;
  size_t at = info->find("API:");
  uint64_t api = 0, features = 0;
  return at != std::string::npos &&
         std::sscanf(info->c_str() + at, "API: %" SCNx64 ":%" SCNx64, &api, &features) == 2 &&
         features == 0;
}

// The userfaultfd number of the last install in a process, beside its
// ledger entry (a plain file: written at once, not deferred like side states).
void record_uffd_number(pid_t pid, int fd) {
  auto path = ledger_side_file(pid, ".uffd", true);
  if (!path) return;
  const std::string tmp = *path + ".tmp", text = std::to_string(fd) + "\n";
  UniqueFd f(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (f.valid() && ::write(f.get(), text.data(), text.size()) == ssize_t(text.size()))
    (void)::rename(tmp.c_str(), path->c_str());
}

std::optional<int> recorded_uffd_number(pid_t pid) {
  auto path = ledger_side_file(pid, ".uffd", false);
  if (!path) return std::nullopt;
  auto text = read_file(*path);
  if (!text.ok() || text->empty()) return std::nullopt;
  const int fd = std::atoi(text->c_str());
  return fd >= 3 ? std::optional<int>(fd) : std::nullopt;
}

// kTrackerFd if free in the target, else the next free number below its
// RLIMIT_NOFILE, else the highest free one below kTrackerFd. Never an fd in
// use: the target's own descriptors are not ours to replace. Except our
// userfaultfd at kTrackerFd: the tracker of an earlier chain of this process
// (in another directory), which a new chain replaces. Passing over it left
// one more userfaultfd in the process per new chain, and the next checkpoint
// refused the process for the one it did not know. Or one a killed tool
// created there but never set up (is_unset_uffd).
Result<int> choose_target_fd(pid_t pid) {
  std::set<int> used;
  DIR* d = ::opendir(proc_path(pid, "fd").c_str());
  if (!d) return sys_error("listing " + proc_path(pid, "fd"));
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') used.insert(std::atoi(e->d_name));
  ::closedir(d);
  if (auto n = recorded_uffd_number(pid);
      n && (check_target_uffd(pid, *n).ok() || is_unset_uffd(pid, *n)))
    return *n;
  if (check_target_uffd(pid, kTrackerFd).ok() || is_unset_uffd(pid, kTrackerFd)) return kTrackerFd;
  long limit = kTrackerFd + 1;
  CKPT_ASSIGN(std::string limits, read_file(proc_path(pid, "limits")));
  size_t at = limits.find("Max open files");
  if (at != std::string::npos) limit = std::strtol(limits.c_str() + at + 14, nullptr, 10);
  for (long n = kTrackerFd; n < limit; ++n)
    if (!used.count(int(n))) return int(n);
  for (long n = std::min<long>(limit, kTrackerFd) - 1; n >= 3; --n)
    if (!used.count(int(n))) return int(n);
  return make_error(EMFILE, "no free file descriptor in the target for the tracker");
}

// Runs `body` as system calls injected into the stopped leader, then gives the
// thread back the registers it was stopped with, adjusted exactly as the
// kernel would have restarted a system call it was blocked in.

// Makes the target create a close-on-exec userfaultfd and put it at `number`
// (dup3 replaces a stale one there). Returns the number.
Result<int> create_target_uffd(pid_t pid, int number) {
  Status st = proc::with_injected_calls(pid, [&](proc::RemoteSyscall& rs) -> Status {
    CKPT_ASSIGN(long fd, rs.call_to_exit(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    // vm.unprivileged_userfaultfd = 0: an unprivileged target may still
    // create one that ignores kernel-mode faults, which WP_ASYNC never sees.
    if (fd == -EPERM) {
      CKPT_ASSIGN(
          fd, rs.call_to_exit(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kabi::kUffdUserModeOnly));
    }
    if (fd < 0) return sys_error("userfaultfd() in the target", int(-fd));
    if (fd == number) return {};
    CKPT_ASSIGN(long moved, rs.call_to_exit(SYS_dup3, uint64_t(fd), uint64_t(number), O_CLOEXEC));
    CKPT_ASSIGN(long closed, rs.call_to_exit(SYS_close, uint64_t(fd)));
    (void)closed;
    if (moved < 0) return sys_error("dup3() in the target", int(-moved));
    return {};
  });
  if (!st.ok()) return st.error();
  return number;
}

void close_target_fd(pid_t pid, int fd) {
  (void)proc::with_injected_calls(pid, [&](proc::RemoteSyscall& rs) -> Status {
    CKPT_ASSIGN(long r, rs.call_to_exit(SYS_close, uint64_t(fd)));
    (void)r;
    return {};
  });
}

}  // namespace ckpt::dirty
