// A scratch directory for a fuzz target: in $CKPT_FUZZ_SCRATCH (run_fuzz.sh
// sets it to a directory it removes afterwards), else /dev/shm or /tmp.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace fuzz {
inline std::string make_scratch() {
  const char* env = std::getenv("CKPT_FUZZ_SCRATCH");
  std::string base = env ? env : ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  std::string t = base + "/ckpt-fuzz-XXXXXX";
  if (!::mkdtemp(t.data())) std::abort();
  return t;
}
}  // namespace fuzz
