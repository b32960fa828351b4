// Record type 23 (TaskCredentials) to and from bytes; docs/format.md has the layout.
#pragma once

#include "image/credentials.hpp"
#include "image/format.hpp"

namespace ckpt::image {

void encode_credentials(const TaskCredentials& c, ByteWriter& w);
bool decode_credentials(ByteReader& r, TaskCredentials* c);

}  // namespace ckpt::image
