// The metadata record decoder (decode_meta: every record type of
// docs/format.md) on a record stream with repaired checksums, so every
// mutation reaches the payload decoders.
#include <cstdint>
#include <vector>

#include "fuzz_fixup.hpp"
#include "image/format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> f(data, data + size);
  uint64_t n = fuzz::fix_records(f, 0);
  ckpt::image::ImageMeta m;
  std::string err;
  (void)ckpt::image::decode_meta(f.data(), f.size(), n, &m, &err);
  // A count that disagrees with the stream must be refused, not trusted.
  (void)ckpt::image::decode_meta(f.data(), f.size(), n + 1, &m, &err);
  return 0;
}
