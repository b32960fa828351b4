#include "dirty/kmod.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "ckpt_dirty.h"  // kmod/include/uapi: the module's interface
#include "dirty/layout.hpp"
#include "util/fd.hpp"

namespace ckpt::dirty {

namespace {

// Opens the device and checks the interface version; `max_range` gets the
// largest range one COLLECT takes.
Result<UniqueFd> open_device(uint64_t* max_range = nullptr) {
  UniqueFd fd(::open(CKPT_DIRTY_DEVICE, O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT)
      return make_error(ENOENT, "ckpt_dirty module not loaded (" CKPT_DIRTY_DEVICE " missing)");
    return sys_error("opening " CKPT_DIRTY_DEVICE);
  }
  ckpt_dirty_version v{};
  if (::ioctl(fd.get(), CKPT_DIRTY_IOC_VERSION, &v) != 0)
    return make_error(EPROTO, std::string("ckpt_dirty module does not answer the version query: ") +
                                  std::strerror(errno));
  if (v.version != CKPT_DIRTY_VERSION || v.page_size != kPage)
    return make_error(EPROTO, "ckpt_dirty module speaks interface version " +
                                  std::to_string(v.version) + ", this build needs " +
                                  std::to_string(CKPT_DIRTY_VERSION));
  if (max_range) *max_range = v.max_range;
  return fd;
}

}  // namespace

FeatureCheck KmodTracker::probe() {
  FeatureCheck c{"kmod", false, ""};
  auto fd = open_device();
  if (!fd.ok()) return c.detail = fd.error().message, c;
  c.ok = true;
  c.detail = "ckpt_dirty module loaded, interface version " + std::to_string(CKPT_DIRTY_VERSION);
  return c;
}

Status KmodTracker::arm(pid_t pid, const std::vector<image::VmaRecord>&, TrackerState* state) {
  const int32_t keep = state->continue_chain ? state->target_fd : -1;
  state->target_fd = -1;
  CKPT_ASSIGN(UniqueFd fd, open_device());
  ckpt_dirty_start a{};
  a.pid = pid;
  if (keep > 0) {
    // A restored process: its memory is the generation that holds `keep`.
    a.flags = CKPT_DIRTY_START_TOKEN;
    a.token = uint64_t(keep);
  }
  if (::ioctl(fd.get(), CKPT_DIRTY_IOC_START, &a) != 0)
    return sys_error("ckpt_dirty: starting to track " + std::to_string(pid));
  state->target_fd = int32_t(a.token);
  return {};
}

Result<bool> KmodTracker::release(pid_t pid, const TrackerState&) {
  auto dev = open_device();
  if (!dev.ok()) return false;  // no module: nothing of it in the process
  ckpt_dirty_stop s{};
  s.pid = pid;
  if (::ioctl(dev->get(), CKPT_DIRTY_IOC_STOP, &s) == 0) return true;
  if (errno == ENOENT || errno == ESRCH) return false;
  return sys_error("ckpt_dirty: ending the tracking of " + std::to_string(pid));
}

Result<DirtySet> KmodTracker::collect(pid_t pid, const std::vector<image::VmaRecord>& vmas,
                                      const std::vector<image::VmaRecord>& prev,
                                      TrackerState* state) {
  auto lost = [&](const std::string& why) -> Result<DirtySet> {
    state->continue_chain = false;
    DirtySet all;
    all.everything = true;
    all.reason = why;
    if (Status st = arm(pid, vmas, state); !st.ok())
      all.reason += "; arming again failed: " + st.error().message;
    return all;
  };
  uint64_t max_range = 0;
  auto dev = open_device(&max_range);
  if (!dev.ok()) return lost(dev.error().message);
  if (state->target_fd <= 0) return lost("tracking was not armed for this process");
  uint64_t token = uint64_t(state->target_fd);

  DirtySet out;
  std::vector<uint64_t> bits;
  for (const image::VmaRecord& v : vmas) {
    Kind kind = classify(v);
    if (kind == Kind::kSkip) continue;
    if (kind == Kind::kUnknown) {
      out.unknown.push_back({v.start, v.size()});
      continue;
    }
    for (const Range& r : uncovered(v, prev)) out.unknown.push_back(r);
    for (uint64_t pos = v.start; pos < v.end;) {
      uint64_t end = std::min<uint64_t>(v.end, pos + max_range);
      uint64_t n = (end - pos) / kPage;
      bits.assign((n + 63) / 64, 0);
      ckpt_dirty_collect a{};
      a.pid = pid;
      a.token = token;
      a.start = pos;
      a.end = end;
      a.bitmap = reinterpret_cast<uint64_t>(bits.data());
      a.bitmap_bits = bits.size() * 64;
      if (::ioctl(dev->get(), CKPT_DIRTY_IOC_COLLECT, &a) != 0) {
        int e = errno;
        if (e == ENOENT)
          return lost(
              "ckpt_dirty does not track this address space (exec, new process, or module "
              "reloaded)");
        if (e == ESTALE)
          return lost(
              "ckpt_dirty tracking was reset since the last checkpoint (another chain, or an "
              "unfinished checkpoint)");
        state->target_fd = -1;  // the token may be spent: the next collect saves all
        return sys_error("ckpt_dirty: collecting written pages of " + std::to_string(pid), e);
      }
      token = a.token;
      for (uint64_t w = 0; w < bits.size(); ++w)
        for (uint64_t word = bits[w]; word;) {
          int b = __builtin_ctzll(word);
          word &= word - 1;
          uint64_t i = w * 64 + uint64_t(b);
          if (i < n) mem::append_range(out.written, pos + i * kPage, kPage);
        }
      pos = end;
    }
  }
  state->target_fd = int32_t(token);
  normalize(out.unknown);
  normalize(out.written);
  out.written = subtract(out.written, out.unknown);
  return out;
}

}  // namespace ckpt::dirty
