// Parsers of /proc text (a process can shape some of it: names of mapped
// files, its comm): maps (byte 0 % 3 == 0), status credentials (1), limits (2).
#include <array>
#include <cstdint>
#include <string>

#include "image/credentials.hpp"
#include "proc/credentials.hpp"
#include "proc/maps.hpp"
#include "proc/task_state.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      (void)ckpt::proc::parse_maps(text);
      break;
    case 1: {
      ckpt::image::TaskCredentials c;
      (void)ckpt::proc::parse_status_credentials(text, &c);
      break;
    }
    default: {
      std::array<uint64_t, 32> limits{};
      (void)ckpt::proc::parse_limits(text, &limits);
    }
  }
  return 0;
}
