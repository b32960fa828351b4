// What every C entry point of ckpt/ckpt.h shares: the handle, the messages,
// and copying the caller's size-prefixed structs in and out.
#pragma once

#include <ckpt/ckpt.h>

#include <algorithm>
#include <ckpt/ckpt.hpp>
#include <cstring>
#include <string>

#include <new>
#include <system_error>

namespace ckpt::capi {
// Messages are cut to this (NUL included): a caller's buffer never has to
// guess, and recording one never allocates (it may follow an out-of-memory).
constexpr size_t kMessageMax = 512;
}  // namespace ckpt::capi

struct ckpt_ctx {
  int api_version = 0;
  char message[ckpt::capi::kMessageMax] = {};
  ckpt_progress_fn progress = nullptr;
  void* progress_user = nullptr;
};

namespace ckpt::capi {

// Records the cause on the handle (when it is a live one) and the thread,
// and returns -code. Never throws.
int fail(ckpt_ctx* ctx, const Error& e) noexcept;
int fail(ckpt_ctx* ctx, int code, const std::string& message) noexcept;
int fail(ckpt_ctx* ctx, int code, const char* message) noexcept;
// "call: what", composed without allocating.
int fail_in(ckpt_ctx* ctx, int code, const char* call, const char* what) noexcept;
// Clears the handle's message; returns 0.
int ok(ckpt_ctx* ctx);
// -EINVAL with a message unless ctx is a live handle: one ckpt_ctx_new made
// and ckpt_ctx_free has not freed (the library keeps the set of them, so a
// garbage or freed pointer is refused without being read).
int check_ctx(ckpt_ctx* ctx, const char* call);
bool live_handle(const ckpt_ctx* ctx);

// Runs `body` (which returns 0 or -errno) so that no C++ exception reaches
// the C caller: out of memory is -ENOMEM, a system error (a thread that
// could not be made) its -errno, anything else -EIO, each with a message
// naming `call`.
template <class F>
int guarded(ckpt_ctx* ctx, const char* call, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail_in(ctx, ENOMEM, call, "out of memory");
  } catch (const std::system_error& e) {
    const int code = e.code().value() > 0 ? e.code().value() : EIO;
    return fail_in(ctx, code, call, e.what());
  } catch (const std::exception& e) {
    return fail_in(ctx, EIO, call, e.what());
  } catch (...) {
    return fail_in(ctx, EIO, call, "an unknown exception");
  }
}

// The handle's progress callback as a ProgressFn for `phase` (empty when none).
ProgressFn progress(const ckpt_ctx* ctx, int phase);

// Copies the caller's options (at least min_size bytes; a bigger struct only
// if what this library does not know is zero) into a zeroed full struct.
// The struct's `reserved` field (which fills what would be tail padding, so
// a field appended later can never hide there) must be zero.
template <class T>
int read_opts(ckpt_ctx* ctx, const T* in, size_t min_size, T& out, const char* what) {
  std::memset(&out, 0, sizeof out);
  if (!in) return fail(ctx, EINVAL, std::string(what) + " is NULL");
  if (in->size < min_size)
    return fail(ctx, EINVAL,
                std::string(what) + ": size " + std::to_string(in->size) +
                    " is too small (at least " + std::to_string(min_size) +
                    "; set size = sizeof the struct)");
  if (in->size > sizeof(T)) {
    const auto* tail = reinterpret_cast<const unsigned char*>(in) + sizeof(T);
    if (std::any_of(tail, tail + (in->size - sizeof(T)), [](unsigned char c) { return c != 0; }))
      return fail(ctx, EINVAL,
                  std::string(what) + " sets fields this libckpt (" + std::to_string(sizeof(T)) +
                      " bytes) does not know: built against a newer ckpt.h?");
  }
  std::memcpy(&out, in, std::min(in->size, sizeof(T)));
  if constexpr (requires { out.reserved; })
    if (out.reserved != 0) return fail(ctx, EINVAL, std::string(what) + ": reserved is not zero");
  return 0;
}

// -EINVAL unless `out` is NULL or has a size that holds at least `size`.
template <class T>
int check_out(ckpt_ctx* ctx, const T* out, const char* what) {
  if (out && out->size < sizeof(size_t))
    return fail(ctx, EINVAL, std::string(what) + ": size is not set");
  return 0;
}

// Writes `full` into the caller's struct, up to its size; what the caller's
// struct has beyond this library's (a newer ckpt.h) is zeroed.
template <class T>
void write_out(const T& full, T* out) {
  if (!out) return;
  size_t keep = out->size;
  std::memcpy(out, &full, std::min(keep, sizeof(T)));
  if (keep > sizeof(T))
    std::memset(reinterpret_cast<unsigned char*>(out) + sizeof(T), 0, keep - sizeof(T));
  out->size = keep;
}

// Copies a string into a fixed NUL-terminated field.
template <size_t N>
void copy_str(char (&dst)[N], const std::string& s) {
  size_t n = std::min(N - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = 0;
}

// A directory argument: not NULL, not empty.
int check_dir(ckpt_ctx* ctx, const char* dir, const char* call);

}  // namespace ckpt::capi
