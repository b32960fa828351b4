#include "image/format.hpp"

#include "image/meta_records.hpp"

#include "image/chain_link.hpp"
#include "image/credentials_codec.hpp"
#include "util/hash.hpp"

namespace ckpt::image {

namespace {

constexpr size_t kHashOffset = 56;

uint64_t header_hash(const uint8_t* block, size_t size) {
  std::vector<uint8_t> copy(block, block + size);
  std::memset(copy.data() + kHashOffset, 0, 8);
  return xxh3(copy.data(), copy.size());
}

}  // namespace

std::vector<uint8_t> encode_header(FileHeader h) {
  std::vector<uint8_t> block(h.header_size, 0);
  uint8_t* p = block.data();
  std::memcpy(p, h.magic.data(), 8);
  std::memcpy(p + 8, &h.version, 4);
  std::memcpy(p + 12, &h.header_size, 4);
  std::memcpy(p + 16, &h.generation, 8);
  std::memcpy(p + 24, h.chain_id.data(), 16);
  std::memcpy(p + 40, &h.count, 8);
  std::memcpy(p + 48, &h.flags, 8);
  uint64_t hh = header_hash(p, block.size());
  std::memcpy(p + kHashOffset, &hh, 8);
  return block;
}

bool decode_header(const uint8_t* block, size_t avail, const Magic& magic, FileHeader* out,
                   std::string* err) {
  if (avail < kSmallHeaderSize) {
    *err = "file is truncated (no complete header)";
    return false;
  }
  FileHeader h;
  std::memcpy(h.magic.data(), block, 8);
  if (h.magic != magic) {
    *err = "bad magic (not a libckpt file of this kind)";
    return false;
  }
  std::memcpy(&h.version, block + 8, 4);
  if (h.version < kOldestFormatVersion || h.version > kFormatVersion) {
    *err = "unsupported format version " + std::to_string(h.version) + " (this build reads " +
           std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion) + ")";
    return false;
  }
  std::memcpy(&h.header_size, block + 12, 4);
  if (h.header_size < kSmallHeaderSize || h.header_size > kPagesHeaderSize) {
    *err = "bad header size";
    return false;
  }
  if (avail < h.header_size) {
    *err = "file is truncated (no complete header)";
    return false;
  }
  std::memcpy(&h.generation, block + 16, 8);
  std::memcpy(h.chain_id.data(), block + 24, 16);
  std::memcpy(&h.count, block + 40, 8);
  std::memcpy(&h.flags, block + 48, 8);
  std::memcpy(&h.header_hash, block + kHashOffset, 8);
  if (header_hash(block, h.header_size) != h.header_hash) {
    *err = "header checksum mismatch";
    return false;
  }
  *out = h;
  return true;
}

bool for_each_record(const uint8_t* p, size_t n, uint64_t nrecords, const char* what,
                     const std::function<bool(RecordType, ByteReader&)>& f, std::string* err) {
  size_t off = 0;
  for (uint64_t i = 0; i < nrecords; ++i) {
    uint32_t type, len;
    if (n - off < 16 ||
        (std::memcpy(&type, p + off, 4), std::memcpy(&len, p + off + 4, 4), n - off - 16 < len)) {
      *err = std::string(what) + " is truncated at record " + std::to_string(i);
      return false;
    }
    uint64_t stored;
    std::memcpy(&stored, p + off + 8 + len, 8);
    if (xxh3(p + off, 8 + len) != stored) {
      *err = std::string(what) + " record " + std::to_string(i) + " checksum mismatch";
      return false;
    }
    ByteReader r(p + off + 8, len);
    if (!f(RecordType(type), r)) {
      *err = std::string(what) + " record " + std::to_string(i) + " is malformed";
      return false;
    }
    off += 16 + len;
  }
  if (off != n) {
    *err = std::string(what) + " has " + std::to_string(n - off) + " unexpected trailing bytes";
    return false;
  }
  return true;
}

bool decode_meta(const uint8_t* p, size_t n, uint64_t nrecords, ImageMeta* out, std::string* err) {
  ImageMeta m;
  if (!for_each_record(
          p, n, nrecords, "metadata",
          [&](RecordType type, ByteReader& r) { return decode_payload(type, r, &m); }, err))
    return false;
  *out = std::move(m);
  return true;
}

void encode_page_hashes(const std::vector<PageHash>& t, std::vector<uint8_t>& out) {
  ByteWriter w;
  w.u64(t.size());
  for (const PageHash& p : t) {
    w.u64(p.vaddr);
    w.u64(p.hash);
  }
  uint64_t h = xxh3(w.data().data(), w.data().size());
  w.u64(h);
  out.insert(out.end(), w.data().begin(), w.data().end());
}

bool decode_page_hashes(const uint8_t* in, size_t n, std::vector<PageHash>* out) {
  uint64_t count;
  if (n < 16) return false;
  std::memcpy(&count, in, 8);
  if (count > (n - 16) / 16 || 16 + count * 16 != n) return false;
  uint64_t stored;
  std::memcpy(&stored, in + n - 8, 8);
  if (xxh3(in, n - 8) != stored) return false;
  out->resize(count);
  std::memcpy(out->data(), in + 8, count * 16);
  return true;
}

void encode_run(const PageRun& r, uint8_t out[kRunRecordSize]) {
  std::memcpy(out, &r.vaddr, 8);
  std::memcpy(out + 8, &r.npages, 4);
  std::memcpy(out + 12, &r.flags, 4);
  std::memcpy(out + 16, &r.content_offset, 8);
  std::memcpy(out + 24, &r.content_hash, 8);
  uint64_t h = xxh3(out, 32);
  std::memcpy(out + 32, &h, 8);
}

bool decode_run(const uint8_t in[kRunRecordSize], PageRun* out) {
  uint64_t stored;
  std::memcpy(&stored, in + 32, 8);
  if (xxh3(in, 32) != stored) return false;
  std::memcpy(&out->vaddr, in, 8);
  std::memcpy(&out->npages, in + 8, 4);
  std::memcpy(&out->flags, in + 12, 4);
  std::memcpy(&out->content_offset, in + 16, 8);
  std::memcpy(&out->content_hash, in + 24, 8);
  return true;
}

}  // namespace ckpt::image
