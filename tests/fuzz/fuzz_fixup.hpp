// Shared by the image fuzz targets: checksums repaired so that mutations
// reach the parsers behind them (a random change almost never keeps an xxh3
// valid). Each target leaves some inputs unrepaired, to cover the checks too.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "util/hash.hpp"

namespace fuzz {

// Repairs the header hash (offset 56, xxh3 of the header block with the hash
// zeroed) when the header size field is plausible.
inline void fix_header(std::vector<uint8_t>& f) {
  if (f.size() < 64) return;
  uint32_t hs;
  std::memcpy(&hs, f.data() + 12, 4);
  if (hs < 64 || hs > f.size() || hs > 4096) return;
  std::vector<uint8_t> copy(f.begin(), f.begin() + hs);
  std::memset(copy.data() + 56, 0, 8);
  uint64_t h = ckpt::xxh3(copy.data(), copy.size());
  std::memcpy(f.data() + 56, &h, 8);
}

// Repairs every record checksum of a metadata record stream starting at
// `off` (u32 type, u32 len, payload, u64 xxh3); returns how many records.
inline uint64_t fix_records(std::vector<uint8_t>& f, size_t off) {
  uint64_t n = 0;
  while (off + 16 <= f.size()) {
    uint32_t len;
    std::memcpy(&len, f.data() + off + 4, 4);
    if (f.size() - off - 16 < len) break;
    uint64_t h = ckpt::xxh3(f.data() + off, 8 + len);
    std::memcpy(f.data() + off + 8 + len, &h, 8);
    off += 16 + len;
    ++n;
  }
  return n;
}

// Repairs a whole meta.img: records, their count in the header, the header.
inline void fix_meta_file(std::vector<uint8_t>& f) {
  if (f.size() < 64) return;
  uint32_t hs;
  std::memcpy(&hs, f.data() + 12, 4);
  if (hs < 64 || hs > f.size()) return;
  uint64_t n = fix_records(f, hs);
  std::memcpy(f.data() + 40, &n, 8);
  fix_header(f);
}

inline std::vector<uint8_t> read_all(const std::string& path) {
  std::vector<uint8_t> v;
  if (FILE* fp = std::fopen(path.c_str(), "rb")) {
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, fp)) > 0) v.insert(v.end(), buf, buf + n);
    std::fclose(fp);
  }
  return v;
}

inline void write_all(const std::string& path, const uint8_t* p, size_t n) {
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp) std::abort();
  if (n && std::fwrite(p, 1, n, fp) != n) std::abort();
  std::fclose(fp);
}

}  // namespace fuzz
