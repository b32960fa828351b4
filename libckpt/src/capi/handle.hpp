// What every C entry point of ckpt/ckpt.h shares: the handle, the messages,
// and copying the caller's size-prefixed structs in and out.
#pragma once

#include <ckpt/ckpt.h>

#include <algorithm>
#include <ckpt/ckpt.hpp>
#include <cstring>
#include <string>

struct ckpt_ctx {
  int api_version = 0;
  std::string message;
  ckpt_progress_fn progress = nullptr;
  void* progress_user = nullptr;
};

namespace ckpt::capi {

// Records the cause on the handle (when there is one) and the thread, and
// returns -code.
int fail(ckpt_ctx* ctx, const Error& e);
int fail(ckpt_ctx* ctx, int code, const std::string& message);
// Clears the handle's message; returns 0.
int ok(ckpt_ctx* ctx);
// -EINVAL with a message unless ctx is a live handle.
int check_ctx(ckpt_ctx* ctx, const char* call);

// The handle's progress callback as a ProgressFn for `phase` (empty when none).
ProgressFn progress(const ckpt_ctx* ctx, int phase);

// Copies the caller's options (at least min_size bytes; a bigger struct only
// if what this library does not know is zero) into a zeroed full struct.
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
  return 0;
}

// -EINVAL unless `out` is NULL or has a size that holds at least `size`.
template <class T>
int check_out(ckpt_ctx* ctx, const T* out, const char* what) {
  if (out && out->size < sizeof(size_t))
    return fail(ctx, EINVAL, std::string(what) + ": size is not set");
  return 0;
}

// Writes `full` into the caller's struct, up to its size.
template <class T>
void write_out(const T& full, T* out) {
  if (!out) return;
  size_t keep = out->size;
  std::memcpy(out, &full, std::min(keep, sizeof(T)));
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
