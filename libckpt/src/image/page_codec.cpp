#include "image/page_codec.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "image/model.hpp"

namespace ckpt::image {

RunCompressor::RunCompressor(int level, unsigned threads)
    : level_(level), threads_(std::max(1u, threads)) {
  for (unsigned i = 0; i < threads_; ++i) ctx_.push_back(ZSTD_createCCtx());
}

RunCompressor::~RunCompressor() {
  for (ZSTD_CCtx* c : ctx_) ZSTD_freeCCtx(c);
}

size_t RunCompressor::bound(size_t len) {
  return (ZSTD_compressBound(len) + kPageSize - 1) / kPageSize * kPageSize;
}

void RunCompressor::compress_one(ZSTD_CCtx* cctx, Job& job) const {
  job.stored_pages = 0;
  if (!cctx) return;  // out of memory at construction: store plain
  const size_t cap = bound(job.len);
  size_t n = ZSTD_compressCCtx(cctx, job.out, cap, job.src, job.len, level_);
  if (ZSTD_isError(n)) return;
  const size_t pages = (n + kPageSize - 1) / kPageSize;
  if (pages * kPageSize >= job.len) return;  // no page saved: plain is cheaper to read
  std::memset(job.out + n, 0, pages * kPageSize - n);
  job.stored_pages = pages;
}

void RunCompressor::run(std::vector<Job>& jobs) {
  // One job (a small add_pages call) is not worth a thread.
  const size_t workers = std::min<size_t>(threads_, jobs.size());
  if (workers <= 1) {
    for (Job& j : jobs) compress_one(ctx_[0], j);
    return;
  }
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (size_t i = w; i < jobs.size(); i += workers) compress_one(ctx_[w], jobs[i]);
    });
  for (size_t i = 0; i < jobs.size(); i += workers) compress_one(ctx_[0], jobs[i]);
  for (std::thread& t : pool) t.join();
}

std::string decompress_run(const uint8_t* src, size_t stored, uint8_t* dst, size_t len) {
  const size_t frame = ZSTD_findFrameCompressedSize(src, stored);
  if (ZSTD_isError(frame))
    return std::string("damaged zstd frame (") + ZSTD_getErrorName(frame) + ")";
  const unsigned long long declared = ZSTD_getFrameContentSize(src, frame);
  if (declared != len) return "zstd frame declares a size that is not the run's";
  for (size_t i = frame; i < stored; ++i)
    if (src[i] != 0) return "non-zero bytes after the zstd frame";
  // One context per thread, kept: a fresh one per run costs its allocation
  // (page faults) on every 1 MiB.
  struct Ctx {
    ZSTD_DCtx* d = ZSTD_createDCtx();
    ~Ctx() { ZSTD_freeDCtx(d); }
  };
  thread_local Ctx ctx;
  if (!ctx.d) return "out of memory for zstd";
  const size_t n = ZSTD_decompressDCtx(ctx.d, dst, len, src, frame);
  if (ZSTD_isError(n)) return std::string("damaged zstd frame (") + ZSTD_getErrorName(n) + ")";
  if (n != len) return "zstd frame decompresses to the wrong size";
  return {};
}

}  // namespace ckpt::image
