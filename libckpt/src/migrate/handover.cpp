#include "migrate/handover.hpp"

#include <fcntl.h>
#include <poll.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "util/clock.hpp"

namespace ckpt::migrate {

namespace {

// The value after "Key:" on its line, or nullptr.
const char* field(const char* status, const char* key) {
  const size_t n = std::strlen(key);
  for (const char* p = status; p && *p;) {
    if (std::strncmp(p, key, n) == 0 && p[n] == ':') {
      p += n + 1;
      while (*p == ' ' || *p == '\t') ++p;
      return p;
    }
    p = std::strchr(p, '\n');
    if (p) ++p;
  }
  return nullptr;
}

bool sigkill_in(const char* mask) {
  if (!mask) return false;
  // The mask is hexadecimal, signal N at bit N-1: SIGKILL (9) is bit 8.
  const unsigned long long m = std::strtoull(mask, nullptr, 16);
  return (m >> 8) & 1;
}

}  // namespace

bool parse_held_state(const char* status, HeldState* out) {
  const char* state = field(status, "State");
  const char* tracer = field(status, "TracerPid");
  if (!state || !tracer) return false;
  out->exiting = *state == 'Z' || *state == 'X';
  out->traced = std::strtol(tracer, nullptr, 10) != 0;
  out->kill_pending = sigkill_in(field(status, "SigPnd")) || sigkill_in(field(status, "ShdPnd"));
  return true;
}

Result<UniqueFd> open_held_status(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return sys_error("opening " + path);
  return fd;
}

bool held_process_runs(int status_fd, double timeout_seconds) {
  const double deadline = now_seconds() + timeout_seconds;
  for (;;) {
    char buf[4096];
    const ssize_t n = ::pread(status_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return false;  // gone (ESRCH): it died with its tracer
    buf[n] = '\0';
    HeldState s;
    if (!parse_held_state(buf, &s)) return false;
    if (s.exiting || s.kill_pending) return false;
    if (!s.traced) return true;
    if (now_seconds() > deadline) return false;
    ::poll(nullptr, 0, 1);  // the dying tracer lets it go within moments
  }
}

}  // namespace ckpt::migrate
