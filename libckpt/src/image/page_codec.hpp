// zstd compression of page runs (docs/format.md, "Compressed runs"): each
// non-zero run may be stored as one zstd frame padded to whole pages; its
// content_hash stays the xxh3 of the uncompressed bytes, so a damaged frame
// is refused like any other checksum mismatch.
#pragma once

#include <zstd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ckpt::image {

// Compression levels cr_full/cr_incr accept (--compress=LEVEL).
constexpr int kMinCompressLevel = 1;
constexpr int kMaxCompressLevel = 19;
constexpr int kDefaultCompressLevel = 1;

// Compresses many runs at once, spread over worker threads (one ZSTD_CCtx each).
class RunCompressor {
 public:
  RunCompressor(int level, unsigned threads);
  ~RunCompressor();
  RunCompressor(const RunCompressor&) = delete;
  RunCompressor& operator=(const RunCompressor&) = delete;

  struct Job {
    const uint8_t* src = nullptr;
    size_t len = 0;           // whole pages
    uint8_t* out = nullptr;   // room for bound(len) bytes, page aligned
    size_t stored_pages = 0;  // result: pages of `out` holding the padded frame, 0: keep it plain
  };
  // The space a job's output may need (whole pages).
  static size_t bound(size_t len);
  // Fills each job's stored_pages; a run that does not shrink by a page stays plain.
  void run(std::vector<Job>& jobs);
  int level() const { return level_; }

 private:
  void compress_one(ZSTD_CCtx* cctx, Job& job) const;
  int level_;
  unsigned threads_;
  std::vector<ZSTD_CCtx*> ctx_;
};

// Decompresses the frame stored in `stored` bytes (a frame, then zero
// padding) into exactly `len` bytes at `dst`. Empty on success, else why
// (a one-line reason: the caller names the run and the file).
std::string decompress_run(const uint8_t* src, size_t stored, uint8_t* dst, size_t len);

}  // namespace ckpt::image
