// Opens one committed generation. open() checks every header, every metadata
// record and every address record; page content is checked by verify_run()
// (restore calls it on each run before the process may run) or verify_all().
#pragma once

#include <ckpt/result.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "image/model.hpp"

namespace ckpt::image {

class SnapshotReader {
 public:
  static Result<std::unique_ptr<SnapshotReader>> open(const std::string& gen_dir);
  ~SnapshotReader();

  const ImageMeta& meta() const { return meta_; }
  const std::vector<PageRun>& runs() const { return runs_; }
  // Every page's hash at this generation (empty unless the hash tracker wrote it).
  const std::vector<PageHash>& page_hashes() const { return page_hashes_; }
  uint64_t content_bytes() const { return content_bytes_; }
  const std::string& path() const { return dir_; }
  // xxh3 of the whole meta.img: what a child generation's chain link names.
  uint64_t meta_digest() const { return meta_digest_; }
  uint32_t format_version() const { return version_; }

  // The content of a run, from a read-only mapping of pages.img (nullptr for
  // zero runs). A compressed run's content exists once verify_run() passed
  // (its decompressed bytes, kept until drop_content() or the reader's end);
  // before that: nullptr.
  const uint8_t* content(const PageRun& run) const;
  // Checks a run's content checksum (a compressed run: decompresses it
  // first; a frame that does not decode is a checksum error too).
  // Thread-safe for distinct runs.
  Status verify_run(const PageRun& run) const;
  // Every run, keeping no decompressed content.
  Status verify_all() const;
  // Frees a compressed run's decompressed content (a no-op otherwise).
  void drop_content(const PageRun& run) const;

 private:
  SnapshotReader() = default;
  std::string dir_;
  ImageMeta meta_;
  std::vector<PageRun> runs_;
  std::vector<PageHash> page_hashes_;
  uint64_t content_bytes_ = 0;
  uint64_t meta_digest_ = 0;
  uint32_t version_ = 0;
  const uint8_t* map_ = nullptr;
  // Decompressed content of verified compressed runs, by what the run record
  // says of its content (offset, hash, pages): two records naming the same
  // offset with different hashes are checked each on its own.
  using PlainKey = std::tuple<uint64_t, uint64_t, uint32_t>;
  static PlainKey key(const PageRun& r) { return {r.content_offset, r.content_hash, r.npages}; }
  mutable std::mutex plain_mu_;
  mutable std::map<PlainKey, std::unique_ptr<uint8_t[]>> plain_;
  size_t map_len_ = 0;
};

}  // namespace ckpt::image
