// Writes one generation: page content streams to pages.img as it arrives;
// addr.img, meta.img and the headers are written at commit, then everything is
// fsynced and the temporary directory renamed into place.
#pragma once

#include <sys/uio.h>

#include <ckpt/result.hpp>
#include <memory>
#include <string>
#include <vector>

#include "image/model.hpp"
#include "image/page_codec.hpp"
#include "image/persister.hpp"
#include "util/fd.hpp"

namespace ckpt::image {

// Where a stream-backed writer sends a generation instead of a directory
// (migration): the same bytes the three files would hold.
class GenerationStream {
 public:
  virtual ~GenerationStream() = default;
  // Page content in file order: the bytes pages.img holds after its header,
  // one iovec per non-zero run, with each run's xxh3 (its content_hash) and
  // its address.
  virtual Status content(const iovec* iov, const uint64_t* hashes, const uint64_t* vaddrs,
                         size_t n) = 0;
  // At commit: pages.img's header, and addr.img and meta.img complete.
  virtual Status commit(const std::vector<uint8_t>& pages_header,
                        const std::vector<uint8_t>& addr_file,
                        const std::vector<uint8_t>& meta_file) = 0;
};

class SnapshotWriter {
 public:
  static Result<std::unique_ptr<SnapshotWriter>> create(const std::string& dir, uint64_t generation,
                                                        const std::array<uint8_t, 16>& chain_id,
                                                        bool direct_io = false);
  // A writer of one job member's three files into `files_dir` (created if
  // missing) inside a generation that the caller commits as a whole:
  // commit() writes and fsyncs the files but renames nothing.
  static Result<std::unique_ptr<SnapshotWriter>> create_in(const std::string& files_dir,
                                                           uint64_t generation,
                                                           const std::array<uint8_t, 16>& chain_id,
                                                           bool direct_io = false);
  // A writer that hands everything to `stream`; commit() is the stream's commit.
  static std::unique_ptr<SnapshotWriter> create_stream(uint64_t generation,
                                                       const std::array<uint8_t, 16>& chain_id,
                                                       std::unique_ptr<GenerationStream> stream);
  ~SnapshotWriter();

  // Appends the pages [vaddr, vaddr + npages * 4 KiB) whose bytes are at
  // `data`. All-zero pages become zero runs and cost no content bytes.
  // Page-aligned `data` keeps O_DIRECT; unaligned data switches the file to
  // buffered writes.
  Status add_pages(uint64_t vaddr, const uint8_t* data, size_t npages);
  // Live checkpoints (pre-copy into the generation being written): forgets
  // the pages already added that lie in `ranges` (sorted, disjoint [start,
  // end)), or with `keep` every page outside them. Their content stays in
  // pages.img until commit, which moves the content past the end of what is
  // left into the holes (as many bytes as were dropped) and truncates the
  // file. Only the index changes here: a run cut in two gets each part's
  // hash from the file at commit (a cut compressed run: its kept parts are
  // decompressed and appended plain then, and commit slides all content
  // down instead). Directory writers only.
  Status drop_pages(const std::vector<MemRange>& ranges, bool keep);
  // A table of every page's hash, stored in addr.img (for the hash tracker).
  void set_page_hashes(std::vector<PageHash> hashes) { page_hashes_ = std::move(hashes); }
  // Writes the address and metadata files and commits the generation atomically.
  Status commit(const ImageMeta& meta);
  // false: commit() fsyncs nothing (CheckpointOptions::no_sync).
  void set_durable(bool durable) { durable_ = durable; }
  // Store non-zero runs as zstd frames where that saves space (level > 0),
  // compressed on `threads` threads per add_pages call. Directory writers
  // only (a stream stays plain). drop_pages keeps the part of a frame it
  // cuts as plain content.
  void set_compression(int level, unsigned threads);

  const std::vector<PageRun>& runs() const { return runs_; }
  const std::vector<PageHash>& page_hashes() const { return page_hashes_; }
  uint64_t content_bytes() const { return content_bytes_; }
  uint64_t zero_pages() const { return zero_pages_; }
  uint64_t pages() const { return pages_; }
  // Bytes the non-zero runs would take uncompressed (= content_bytes() when plain).
  uint64_t plain_bytes() const { return plain_bytes_; }
  // Bytes of all three files, known after commit.
  uint64_t bytes_total() const { return bytes_total_; }
  // xxh3 of the committed meta.img (the next generation's parent digest).
  uint64_t meta_digest() const { return meta_digest_; }

 private:
  SnapshotWriter() = default;
  Status flush_iov();
  Status settle_cuts();
  Status fill_holes();
  Status compact_content();
  void discard();

  std::string dir_, tmp_dir_, final_dir_;
  uint64_t generation_ = 0;
  std::array<uint8_t, 16> chain_id_{};
  UniqueFd pages_fd_;
  std::unique_ptr<GenerationStream> stream_;
  std::vector<PageRun> runs_;
  // Per run (empty until a drop): cut by drop_pages, its hash still to make
  // from the file at commit; `frame` the compressed run it is part of
  // (npages 0: a part of a plain run, content in place).
  struct Cut {
    bool cut = false;
    PageRun frame;
  };
  std::vector<Cut> cuts_;
  std::vector<PageRun> spare_runs_;  // drop_pages builds the next index here
  std::vector<Cut> spare_cuts_;
  std::vector<PageHash> page_hashes_;
  std::vector<iovec> iov_;
  std::vector<uint64_t> iov_hash_, iov_vaddr_;  // stream writers: each iovec's run hash, address
  uint64_t content_bytes_ = 0, zero_pages_ = 0, pages_ = 0, bytes_total_ = 0, plain_bytes_ = 0;
  std::unique_ptr<RunCompressor> compressor_;
  uint8_t* zbuf_ = nullptr;  // compressed frames of one add_pages call (page aligned)
  size_t zbuf_len_ = 0;
  bool any_compressed_ = false;
  uint64_t meta_digest_ = 0;
  bool committed_ = false;
  bool durable_ = true;
  // Content bytes up to which writeback was started (sync_file_range).
  // Durable writers: pages.img made durable in steps while it is written
  // (started at the first step's worth of content).
  std::unique_ptr<Persister> persister_;
  static constexpr uint64_t kWritebackChunk = 16ull << 20;
};

}  // namespace ckpt::image
