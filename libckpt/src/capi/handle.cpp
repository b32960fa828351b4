// The handle, its messages and the thread's last message.
#include "capi/handle.hpp"

#include <cerrno>
#include <ckpt/tracker.hpp>
#include <new>

namespace {
thread_local std::string t_message;
}  // namespace

namespace ckpt::capi {

int fail(ckpt_ctx* ctx, int code, const std::string& message) {
  t_message = message;
  if (ctx && ctx->api_version) ctx->message = message;
  return code > 0 ? -code : -EINVAL;
}

int fail(ckpt_ctx* ctx, const Error& e) {
  return fail(ctx, e.code, e.message);
}

int ok(ckpt_ctx* ctx) {
  ctx->message.clear();
  return 0;
}

int check_ctx(ckpt_ctx* ctx, const char* call) {
  if (!ctx) return fail(nullptr, EINVAL, std::string(call) + ": the handle is NULL");
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

extern "C" int ckpt_ctx_new(int api_version, ckpt_ctx** out) {
  using ckpt::capi::fail;
  if (!out) return fail(nullptr, EINVAL, "ckpt_ctx_new: out is NULL");
  *out = nullptr;
  if (api_version < 1 || api_version > CKPT_API_VERSION)
    return fail(nullptr, EINVAL,
                "ckpt_ctx_new: unknown API version " + std::to_string(api_version) +
                    " (this libckpt has 1 to " + std::to_string(CKPT_API_VERSION) + ")");
  auto* c = new (std::nothrow) ckpt_ctx;
  if (!c) return fail(nullptr, ENOMEM, "ckpt_ctx_new: out of memory");
  c->api_version = api_version;
  *out = c;
  return 0;
}

extern "C" void ckpt_ctx_free(ckpt_ctx* ctx) {
  delete ctx;
}

extern "C" const char* ckpt_ctx_message(const ckpt_ctx* ctx) {
  return ctx ? ctx->message.c_str() : t_message.c_str();
}

extern "C" const char* ckpt_last_message(void) {
  return t_message.c_str();
}

extern "C" const char* ckpt_version(void) {
  return CKPT_VERSION_STRING;
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
