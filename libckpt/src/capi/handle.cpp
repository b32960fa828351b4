// The handle, its messages and the thread's last message.
#include "capi/handle.hpp"

#include <cerrno>
#include <ckpt/tracker.hpp>
#include <cstdio>
#include <mutex>
#include <new>
#include <unordered_set>

// ckpt.h's numbers and the project's (CMakeLists.txt) must agree.
static_assert(CKPT_VERSION_MAJOR == CKPT_BUILD_VERSION_MAJOR &&
                  CKPT_VERSION_MINOR == CKPT_BUILD_VERSION_MINOR &&
                  CKPT_VERSION_PATCH == CKPT_BUILD_VERSION_PATCH,
              "ckpt.h's CKPT_VERSION_* differ from the project version in CMakeLists.txt");

namespace {

thread_local char t_message[ckpt::capi::kMessageMax];

// The live handles. A lookup refuses a garbage or freed pointer without
// reading through it; it is the library's only shared state, and guards no
// configuration.
std::mutex g_handles_mutex;
std::unordered_set<const ckpt_ctx*>& handles() {
  static auto* set = new std::unordered_set<const ckpt_ctx*>;  // never destroyed: used at exit
  return *set;
}

void copy_message(char (&dst)[ckpt::capi::kMessageMax], const char* text, size_t len) {
  const size_t n = std::min(len, sizeof dst - 1);
  std::memcpy(dst, text, n);
  dst[n] = 0;
}

}  // namespace

namespace ckpt::capi {

bool live_handle(const ckpt_ctx* ctx) {
  if (!ctx) return false;
  std::lock_guard<std::mutex> l(g_handles_mutex);
  return handles().count(ctx) != 0;
}

int fail(ckpt_ctx* ctx, int code, const char* message) noexcept {
  const size_t len = std::strlen(message);
  copy_message(t_message, message, len);
  if (live_handle(ctx)) copy_message(ctx->message, message, len);
  return code > 0 ? -code : -EINVAL;
}

int fail_in(ckpt_ctx* ctx, int code, const char* call, const char* what) noexcept {
  char line[kMessageMax];
  std::snprintf(line, sizeof line, "%s: %s", call, what);
  return fail(ctx, code, line);
}

int fail(ckpt_ctx* ctx, int code, const std::string& message) noexcept {
  return fail(ctx, code, message.c_str());
}

int fail(ckpt_ctx* ctx, const Error& e) noexcept {
  return fail(ctx, e.code, e.message.c_str());
}

int ok(ckpt_ctx* ctx) {
  ctx->message[0] = 0;
  return 0;
}

int check_ctx(ckpt_ctx* ctx, const char* call) {
  if (!ctx) return fail(nullptr, EINVAL, std::string(call) + ": the handle is NULL");
  if (!live_handle(ctx))
    return fail(nullptr, EINVAL,
                std::string(call) + ": not a handle of ckpt_ctx_new (freed, or garbage)");
  return 0;
}

int check_dir(ckpt_ctx* ctx, const char* dir, const char* call) {
  if (!dir || !*dir) return fail(ctx, EINVAL, std::string(call) + ": no directory given");
  return 0;
}

ProgressFn progress(const ckpt_ctx* ctx, int phase) {
  if (!ctx->progress) return {};
  ckpt_progress_fn fn = ctx->progress;
  void* user = ctx->progress_user;
  return [fn, user, phase](uint64_t done, uint64_t total) { fn(user, phase, done, total); };
}

}  // namespace ckpt::capi

using ckpt::capi::fail;
using ckpt::capi::guarded;

extern "C" int ckpt_ctx_new(int api_version, ckpt_ctx** out) {
  return guarded(nullptr, "ckpt_ctx_new", [&] {
    if (!out) return fail(nullptr, EINVAL, "ckpt_ctx_new: out is NULL");
    *out = nullptr;
    if (api_version < 1 || api_version > CKPT_API_VERSION)
      return fail(nullptr, EINVAL,
                  "ckpt_ctx_new: unknown API version " + std::to_string(api_version) +
                      " (this libckpt has 1 to " + std::to_string(CKPT_API_VERSION) + ")");
    auto* c = new (std::nothrow) ckpt_ctx;
    if (!c) return fail(nullptr, ENOMEM, "ckpt_ctx_new: out of memory");
    c->api_version = api_version;
    {
      std::lock_guard<std::mutex> l(g_handles_mutex);
      handles().insert(c);
    }
    *out = c;
    return 0;
  });
}

extern "C" void ckpt_ctx_free(ckpt_ctx* ctx) {
  if (!ctx) return;
  {
    std::lock_guard<std::mutex> l(g_handles_mutex);
    if (handles().erase(ctx) == 0) return;  // freed already, or never ours
  }
  delete ctx;
}

extern "C" const char* ckpt_ctx_message(const ckpt_ctx* ctx) {
  if (!ctx) return t_message;
  if (!ckpt::capi::live_handle(ctx)) return "not a handle of ckpt_ctx_new (freed, or garbage)";
  return ctx->message;
}

extern "C" const char* ckpt_last_message(void) {
  return t_message;
}

extern "C" const char* ckpt_version(void) {
  return CKPT_VERSION_STRING;
}

extern "C" unsigned ckpt_version_number(void) {
  return CKPT_VERSION_NUMBER;
}

extern "C" int ckpt_check_version(unsigned major, unsigned minor) {
  if (major == CKPT_VERSION_MAJOR && minor <= CKPT_VERSION_MINOR) return 0;
  return fail(nullptr, EINVAL,
              "libckpt " CKPT_VERSION_STRING " is not compatible with " + std::to_string(major) +
                  "." + std::to_string(minor) +
                  " (the same major version, a minor at least as high)");
}

extern "C" const char* ckpt_tracker_name(unsigned index) {
  const auto& kinds = ckpt::tracker_kinds();
  return index < kinds.size() ? kinds[index].name : nullptr;
}

extern "C" int ckpt_set_progress(ckpt_ctx* ctx, ckpt_progress_fn fn, void* user) {
  if (int rc = ckpt::capi::check_ctx(ctx, "ckpt_set_progress")) return rc;
  ctx->progress = fn;
  ctx->progress_user = fn ? user : nullptr;
  return ckpt::capi::ok(ctx);
}
