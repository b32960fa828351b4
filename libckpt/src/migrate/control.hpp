// The messages between a receiver's two processes (SOCK_SEQPACKET): the
// connection handler, sandboxed, that reads the stream into staging, and
// the monitor, that builds and restores the process (migrate/receiver,
// docs/security.md "A receiver killed after COMMIT"). One kind byte, then
// the kind's data; descriptors may go along (SCM_RIGHTS).
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "util/fd.hpp"

namespace ckpt::migrate {

enum class Ctl : char {
  kNone = 0,  // end of file: the other process is gone
  // handler -> monitor
  kCommitted = 'G',     // u64 generation: committed in staging
  kJobCommitted = 'J',  // u64 generation of a job: committed in staging
  kLayout = 'L',        // u64 generation: its layout arrived (metadata first)
  kRuns = 'R',          // u64 generation + n x (u64 vaddr, u64 bytes, u64 offset): landed runs
  kComplete = 'C',      // u64 generation: the stream is complete, restore it
  kDone = 'D',          // u64 bytes received: the sender said DONE
  // monitor -> handler
  kHeld = 'H',     // i32 pid + the leader's /proc status and stat: ready, about to be let go
  kRunning = 'P',  // i32 pid: it runs
  // either way
  kError = 'E',  // a one-line message
};

struct CtlMessage {
  Ctl kind = Ctl::kNone;
  std::string data;
  // The u64 the kind carries, when the data is exactly that.
  bool u64(uint64_t* v) const;
};

// Runs per kRuns message.
constexpr size_t kReportRuns = 1024;

// Sends `kind` with `len` bytes of `data`; the descriptors in `pass` (two
// at most) go along.
Status ctl_send(int fd, Ctl kind, const void* data = nullptr, size_t len = 0,
                std::initializer_list<int> pass = {});
Status ctl_send_u64(int fd, Ctl kind, uint64_t v);
// The next message (kind kNone at end of file); descriptors that came with
// it go to `*got` (closed when not asked for).
CtlMessage ctl_recv(int fd, std::vector<UniqueFd>* got = nullptr);

}  // namespace ckpt::migrate
