// When pre-copy stops and the final, frozen round begins: shared by live
// migration (migrate/sender) and live checkpoints (dump/precopy).
#pragma once

#include <cstdint>

namespace ckpt::dump {

struct PrecopyLimits {
  uint64_t threshold_bytes = 1 << 20;  // the dirty set is under this
  uint64_t diff_bytes = 256 << 10;     // it shrank by less than this since the previous round
  double deadline_seconds = 60;        // pre-copy has run this long
  int max_rounds = 30;                 // this is round max_rounds
};

// Round `round` (1-based) found `bytes` dirty, the previous one `prev_bytes`,
// `elapsed` seconds after the start: nullptr to copy it while the target
// runs, or why this round is the final one. Round 1 always runs live.
inline const char* precopy_stop(const PrecopyLimits& l, int round, uint64_t bytes,
                                uint64_t prev_bytes, double elapsed) {
  if (round == 1) return nullptr;
  if (bytes <= l.threshold_bytes) return "dirty set under the threshold";
  if (round > 2 && bytes + l.diff_bytes > prev_bytes) return "dirty set no longer shrinks";
  if (elapsed >= l.deadline_seconds) return "deadline";
  if (round >= l.max_rounds) return "maximum number of rounds";
  return nullptr;
}

}  // namespace ckpt::dump
