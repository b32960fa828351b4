// The userfaultfd the pagemap-scan tracker keeps in its target: made there
// by injected calls at a number the target does not use (kTrackerFd if
// free), recognised again by the next tool run (its fdinfo shows our
// features; its number is recorded beside the ledger entry), and removed.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <cstdint>
#include <optional>

#include "mem/kernel_abi.hpp"
#include "mem/range.hpp"
#include "util/fd.hpp"

namespace ckpt::dirty {

// The userfaultfd features the tracker sets up.
constexpr uint64_t kFeatures = kabi::kUffdFeatureWpAsync | kabi::kUffdFeatureWpUnpopulated;

// Registers `r` for write-protect on `uffd`: 0 or a negative errno.
int register_wp(int uffd, mem::Range r);
// The target's /proc/PID/pagemap.
Result<UniqueFd> open_pagemap(pid_t pid);
// Whether the target's `fd` is a userfaultfd we set up (UFFDIO_API done
// with our features, as its fdinfo shows); the reason when it is not.
Status check_target_uffd(pid_t pid, int fd);
// A userfaultfd at `fd` on which nobody ever called UFFDIO_API: what a tool
// killed between creating and setting it up leaves behind.
bool is_unset_uffd(pid_t pid, int fd);
// The number of the last install in a process, beside its ledger entry.
void record_uffd_number(pid_t pid, int fd);
std::optional<int> recorded_uffd_number(pid_t pid);
// Where a new userfaultfd goes in the target: its recorded number or
// kTrackerFd when ours (or never set up), else a free number.
Result<int> choose_target_fd(pid_t pid);
// Makes the target create a close-on-exec userfaultfd at `number`.
Result<int> create_target_uffd(pid_t pid, int number);
// Closes the target's `fd` by an injected call.
void close_target_fd(pid_t pid, int fd);

}  // namespace ckpt::dirty
