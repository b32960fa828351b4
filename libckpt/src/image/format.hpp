// On-disk constants and encoders of the three-file snapshot (docs/format.md).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "image/model.hpp"

namespace ckpt::image {

// Version 2 added the chain link (record 22); version-1 images stay readable.
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kOldestFormatVersion = 1;

// Each magic starts with a non-ASCII byte and ends in CR LF, so a file that
// went through a text-mode transfer or got swapped with another is refused.
using Magic = std::array<uint8_t, 8>;
constexpr Magic kPagesMagic = {0x89, 'C', 'K', 'P', 'T', 'P', '\r', '\n'};
constexpr Magic kAddrMagic = {0x89, 'C', 'K', 'P', 'T', 'A', '\r', '\n'};
constexpr Magic kMetaMagic = {0x89, 'C', 'K', 'P', 'T', 'M', '\r', '\n'};

constexpr uint32_t kPagesHeaderSize = 4096;  // content stays page aligned
constexpr uint32_t kSmallHeaderSize = 64;
constexpr uint32_t kRunRecordSize = 40;
constexpr uint32_t kMaxRunPages = 256;  // 1 MiB: the checksum granularity

// addr.img header flag: a page-hash table follows the run records.
constexpr uint64_t kAddrHasPageHashes = 1;
// addr.img header flag: some runs are zstd-compressed (readers before it refuse the file).
constexpr uint64_t kAddrHasZstdRuns = 2;

constexpr const char* kPagesFile = "pages.img";
constexpr const char* kAddrFile = "addr.img";
constexpr const char* kMetaFile = "meta.img";

// The common header at offset 0 of each file (64 bytes used).
struct FileHeader {
  Magic magic{};
  uint32_t version = kFormatVersion;
  uint32_t header_size = 0;
  uint64_t generation = 0;
  std::array<uint8_t, 16> chain_id{};
  uint64_t count = 0;  // pages: content bytes; addr: runs; meta: records
  uint64_t flags = 0;
  uint64_t header_hash = 0;
};

// Encodes `h` into a block of h.header_size bytes (zero padded), hash included.
std::vector<uint8_t> encode_header(FileHeader h);
// Decodes and checks magic, version, size and hash; on failure *err says why.
bool decode_header(const uint8_t* block, size_t avail, const Magic& magic, FileHeader* out,
                   std::string* err);

// Metadata record types.
enum class RecordType : uint32_t {
  kGeneration = 1,
  kProcess = 2,
  kMm = 3,
  kVdso = 4,
  kVma = 5,
  kThread = 6,
  kFile = 7,
  kSignals = 8,
  kComplete = 9,
  kTracker = 10,
  // 11-19 are kept for descriptor kinds.
  kProcessState = 20,
  kPosixTimer = 21,
  kChainLink = 22,    // image/chain_link.hpp
  kCredentials = 23,  // image/credentials_codec
  // job.img (image/job_image.hpp)
  kJobMember = 24,
  kJobShare = 25,
  kScratchFile = 26,  // a member's meta.img: ImageMeta::scratch
};

// Little-endian byte sink/source for record payloads.
class ByteWriter {
 public:
  void u32(uint32_t v) { put(&v, 4); }
  void u64(uint64_t v) { put(&v, 8); }
  void i32(int32_t v) { put(&v, 4); }
  void i64(int64_t v) { put(&v, 8); }
  void str(std::string_view s) {
    u32(uint32_t(s.size()));
    put(s.data(), s.size());
  }
  void bytes(const void* p, size_t n) { put(p, n); }
  std::vector<uint8_t>& data() { return buf_; }

 private:
  void put(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  bool u32(uint32_t* v) { return get(v, 4); }
  bool u64(uint64_t* v) { return get(v, 8); }
  bool i32(int32_t* v) { return get(v, 4); }
  bool i64(int64_t* v) { return get(v, 8); }
  bool str(std::string* s) {
    uint32_t n;
    if (!u32(&n) || size_t(end_ - p_) < n) return false;
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool bytes(void* out, size_t n) { return get(out, n); }
  size_t left() const { return size_t(end_ - p_); }

 private:
  bool get(void* out, size_t n) {
    if (size_t(end_ - p_) < n) return false;
    if (n) std::memcpy(out, p_, n);  // an empty vector's data() may be null
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

// A record is: u32 type, u32 length, payload, u64 xxh3(type..payload).
void append_record(ByteWriter& out, RecordType type, ByteWriter& payload, uint64_t* count);
// Walks `nrecords` records of a stream, checking each one's checksum, and
// hands each payload to `f` (false: malformed). `what` names the stream in
// messages ("metadata").
bool for_each_record(const uint8_t* p, size_t n, uint64_t nrecords, const char* what,
                     const std::function<bool(RecordType, ByteReader&)>& f, std::string* err);

// Metadata <-> records. encode_meta returns the record stream (no header) and
// the record count; decode_meta parses a verified stream.
std::vector<uint8_t> encode_meta(const ImageMeta& meta, uint64_t* nrecords);
bool decode_meta(const uint8_t* p, size_t n, uint64_t nrecords, ImageMeta* out, std::string* err);

// The page-hash table of addr.img: u64 n, n x (u64 vaddr, u64 hash), u64
// xxh3 of everything before it. Appended to `out`; decode reads all of `in`.
void encode_page_hashes(const std::vector<PageHash>& t, std::vector<uint8_t>& out);
bool decode_page_hashes(const uint8_t* in, size_t n, std::vector<PageHash>* out);

// Address-file records.
void encode_run(const PageRun& r, uint8_t out[kRunRecordSize]);
bool decode_run(const uint8_t in[kRunRecordSize], PageRun* out);

}  // namespace ckpt::image
