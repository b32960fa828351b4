#include "migrate/handshake.hpp"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cmath>
#include <cstring>
#include <string>

#include "util/clock.hpp"
#include "util/hash.hpp"

namespace ckpt::migrate {

namespace {

Status read_by(int fd, uint8_t* p, size_t len, double deadline) {
  size_t have = 0;
  while (have < len) {
    const double left = deadline - now_seconds();
    if (left <= 0)
      return make_error(ETIMEDOUT, "no authentication within the deadline (--handshake-timeout)");
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, int(std::ceil(left * 1000)));
    if (r < 0 && errno != EINTR) return sys_error("waiting for the sender");
    if (r <= 0) continue;
    ssize_t n = ::recv(fd, p + have, len - have, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return sys_error("receiving the handshake");
    }
    if (n == 0) return make_error(EPIPE, "the peer closed the connection during the handshake");
    have += size_t(n);
  }
  return {};
}

// Best effort: a peer that does not read must not block us.
void send_error(int fd, const std::string& m) {
  uint8_t h[kFrameHeaderSize];
  encode_frame_header(kError, m.size(), xxh3(m.data(), m.size()), h);
  std::string f(reinterpret_cast<const char*>(h), sizeof h);
  f += m;
  (void)::send(fd, f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

Result<FrameHeader> decode_frame_header(const uint8_t* h, uint64_t max_len) {
  if (get_u32(h) != kFrameMagic)
    return make_error(EBADMSG, "not a migration stream (bad frame magic)");
  FrameHeader f{get_u32(h + 4), get_u64(h + 8), get_u64(h + 16)};
  if (f.type < kHello || f.type > kLastFrameType)
    return make_error(EBADMSG, "unknown frame type " + std::to_string(f.type));
  const uint64_t limit = max_len ? std::min(max_len, max_payload(f.type)) : max_payload(f.type);
  if (f.len > limit)
    return make_error(EBADMSG, std::string(frame_name(f.type)) + " frame too long (" +
                                   std::to_string(f.len) + " bytes)");
  return f;
}

Result<FrameHeader> read_frame_by(int fd, uint64_t max_len, double deadline,
                                  std::vector<uint8_t>* payload) {
  uint8_t h[kFrameHeaderSize];
  CKPT_TRY(read_by(fd, h, sizeof h, deadline));
  CKPT_ASSIGN(FrameHeader f, decode_frame_header(h, max_len));
  payload->resize(f.len);
  CKPT_TRY(read_by(fd, payload->data(), f.len, deadline));
  if (frame_check(h, xxh3(payload->data(), f.len)) != f.check)
    return make_error(EBADMSG, std::string(frame_name(f.type)) + " frame checksum mismatch");
  return f;
}

Result<Mac> accept_sender(int fd, const std::vector<uint8_t>& token, double deadline) {
  std::vector<uint8_t> p;
  CKPT_ASSIGN(FrameHeader hello, read_frame_by(fd, 8 + kNonceSize, deadline, &p));
  if (hello.type != kHello || hello.len != 8 + kNonceSize)
    return make_error(EBADMSG, "protocol error: the stream does not start with HELLO");
  if (get_u32(p.data()) != kProtocolVersion) {
    send_error(fd, "unsupported protocol version");
    return make_error(EPROTO,
                      "sender speaks protocol version " + std::to_string(get_u32(p.data())));
  }
  uint8_t theirs[kNonceSize], mine[kNonceSize];
  std::memcpy(theirs, p.data() + 8, kNonceSize);
  if (::getrandom(mine, sizeof mine, 0) != ssize_t(sizeof mine)) return sys_error("getrandom");
  std::vector<uint8_t> ch;
  put_u32(ch, kProtocolVersion);
  put_u32(ch, kFeatureLayoutFirst);
  ch.insert(ch.end(), mine, mine + kNonceSize);
  CKPT_TRY(FrameWriter(fd).send(kChallenge, ch.data(), ch.size()));
  CKPT_ASSIGN(FrameHeader auth, read_frame_by(fd, kMacSize, deadline, &p));
  CKPT_ASSIGN(Mac want, hmac(token, "ckpt-migrate-v1 sender", mine, theirs));
  if (auth.type != kAuth || auth.len != kMacSize || !mac_equal(p.data(), want.data())) {
    send_error(fd, "authentication failed");
    return make_error(EACCES, "authentication failed: the sender does not know the token");
  }
  return hmac(token, "ckpt-migrate-v1 receiver", theirs, mine);
}

}  // namespace ckpt::migrate
