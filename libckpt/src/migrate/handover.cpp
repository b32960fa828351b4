#include "migrate/handover.hpp"

#include <fcntl.h>
#include <poll.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "proc/status.hpp"
#include "util/clock.hpp"

namespace ckpt::migrate {

namespace {

bool sigkill_in(const std::string& status, const char* key) {
  uint64_t mask = 0;
  // Signal N is bit N-1: SIGKILL (9) is bit 8.
  return proc::status_hex(status, key, &mask) && ((mask >> 8) & 1);
}

// The flags field of /proc/PID/stat (the 9th; the name before it, in
// parentheses, may hold spaces and parentheses), or -1.
long long stat_flags(const char* stat) {
  const char* p = std::strrchr(stat, ')');
  if (!p) return -1;
  ++p;
  for (int i = 0; i < 7; ++i) {  // state ppid pgrp session tty_nr tpgid flags
    while (*p == ' ') ++p;
    if (!*p) return -1;
    if (i == 6) return std::strtoll(p, nullptr, 10);
    while (*p && *p != ' ') ++p;
  }
  return -1;
}

constexpr long long kPfExiting = 0x4, kPfSignaled = 0x400;  // include/linux/sched.h

// Reads a whole small /proc file from its start; false when the process is gone.
bool reread(int fd, char* buf, size_t cap) {
  const ssize_t n = ::pread(fd, buf, cap - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

enum class Look { kTraced, kRuns, kLost };

Look look(const HeldProcess& held) {
  char status[4096], stat[1024];
  // Status first: a SIGKILL gone from its pending set shows in stat's flags
  // by the time stat is read.
  if (!reread(held.status.get(), status, sizeof status) ||
      !reread(held.stat.get(), stat, sizeof stat))
    return Look::kLost;  // gone (ESRCH): it died with its tracer
  HeldState s;
  if (!parse_held_state(status, stat, &s) || s.exiting || s.kill_pending) return Look::kLost;
  return s.traced ? Look::kTraced : Look::kRuns;
}

}  // namespace

bool parse_held_state(const char* status_text, const char* stat, HeldState* out) {
  const std::string status(status_text);
  std::string state, tracer;
  const long long flags = stat_flags(stat);
  if (!proc::status_field(status, "State", &state) ||
      !proc::status_field(status, "TracerPid", &tracer) || flags < 0)
    return false;
  const size_t at = state.find_first_not_of(" \t");
  const char letter = at == std::string::npos ? '\0' : state[at];
  out->exiting = letter == 'Z' || letter == 'X' || (flags & (kPfExiting | kPfSignaled));
  out->traced = std::strtol(tracer.c_str(), nullptr, 10) != 0;
  out->kill_pending = sigkill_in(status, "SigPnd") || sigkill_in(status, "ShdPnd");
  return true;
}

Result<HeldProcess> open_held(pid_t pid) {
  HeldProcess h;
  const std::string dir = "/proc/" + std::to_string(pid) + "/";
  h.status.reset(::open((dir + "status").c_str(), O_RDONLY | O_CLOEXEC));
  h.stat.reset(::open((dir + "stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (!h.status.valid() || !h.stat.valid()) return sys_error("opening " + dir + "status and stat");
  return h;
}

bool held_process_runs(const HeldProcess& held, double timeout_seconds) {
  const double deadline = now_seconds() + timeout_seconds;
  Look l;
  while ((l = look(held)) == Look::kTraced) {
    if (now_seconds() > deadline) return false;
    ::poll(nullptr, 0, 1);  // the dying tracer lets it go within moments
  }
  if (l == Look::kLost) return false;
  ::poll(nullptr, 0, 20);
  return look(held) == Look::kRuns;
}

}  // namespace ckpt::migrate
