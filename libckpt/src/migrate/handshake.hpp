// The receiver's side of the handshake (HELLO, CHALLENGE, AUTH), run on a
// connection nobody has authenticated yet: every read is exact (nothing past
// AUTH is consumed, the session handler reads on from there) and bounded by
// an absolute deadline, so a silent or slow peer costs one short wait.
#pragma once

#include <ckpt/result.hpp>
#include <cstdint>
#include <vector>

#include "migrate/protocol.hpp"

namespace ckpt::migrate {

struct FrameHeader {
  uint32_t type = 0;
  uint64_t len = 0;
  uint64_t check = 0;
};

// Checks a 24-byte header: magic, known type, length within max_payload(type)
// and within `max_len` (0: no further limit).
Result<FrameHeader> decode_frame_header(const uint8_t* h, uint64_t max_len);

// Reads exactly one frame (header, payload, check) before `deadline`
// (now_seconds() clock); the payload in `payload`.
Result<FrameHeader> read_frame_by(int fd, uint64_t max_len, double deadline,
                                  std::vector<uint8_t>* payload);

// Runs the receiver's part of the handshake up to and including the check
// of AUTH; returns the proof the receiver sends in AUTH_OK (not sent yet:
// the session handler sends it with the first generation number). A
// version mismatch or a wrong MAC is answered with an ERROR frame.
Result<Mac> accept_sender(int fd, const std::vector<uint8_t>& token, double deadline);

}  // namespace ckpt::migrate
