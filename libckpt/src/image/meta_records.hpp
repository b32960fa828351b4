// meta.img's records: the metadata of one process written as a sequence of
// checksummed records, and each record read back into the model.
#pragma once

#include <cstdint>
#include <vector>

#include "image/format.hpp"

namespace ckpt::image {

// decode_payload: one record's payload into `m`; false when it is malformed.
// Unknown types (a newer minor revision) are skipped.
bool decode_payload(RecordType type, ByteReader& r, ImageMeta* m);

}  // namespace ckpt::image
