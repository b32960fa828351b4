#include "migrate/protocol.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "util/hash.hpp"

namespace ckpt::migrate {

const char* frame_name(uint32_t type) {
  switch (type) {
    case kHello:
      return "HELLO";
    case kChallenge:
      return "CHALLENGE";
    case kAuth:
      return "AUTH";
    case kAuthOk:
      return "AUTH_OK";
    case kGenBegin:
      return "GEN_BEGIN";
    case kContent:
      return "CONTENT";
    case kGenFiles:
      return "GEN_FILES";
    case kCommit:
      return "COMMIT";
    case kRunning:
      return "RUNNING";
    case kError:
      return "ERROR";
    case kDone:
      return "DONE";
    case kApplied:
      return "APPLIED";
    case kJobBegin:
      return "JOB_BEGIN";
    case kJobFile:
      return "JOB_FILE";
    case kJobEnd:
      return "JOB_END";
    case kNodeStep:
      return "NODE_STEP";
    case kGenLayout:
      return "GEN_LAYOUT";
    case kGenRuns:
      return "GEN_RUNS";
  }
  return "unknown";
}

uint64_t max_payload(uint32_t type) {
  switch (type) {
    case kHello:
    case kChallenge:
      return 8 + kNonceSize;
    case kAuth:
      return kMacSize;
    case kAuthOk:
      return kMacSize + 8;
    case kGenBegin:
      return 32;
    case kContent:
      return 1 << 20;  // one run: at most 256 pages
    case kGenFiles:
    case kGenLayout:
      return 1ull << 30;
    case kGenRuns:
      return 16 * 4096;  // 4096 runs: the sender splits a longer batch (migrate/sender)
    case kCommit:
      return 8;
    case kRunning:
      return 4;
    case kError:
      return 4096;
    case kDone:
      return 0;
    case kApplied:
    case kJobBegin:
    case kJobEnd:
      return 8;
    case kJobFile:
      return 4 + 255 + 8 + (4 << 20);
    case kNodeStep:
      return 24 + 4096;
  }
  return 0;
}

void put_u32(std::vector<uint8_t>& v, uint32_t x) {
  for (int i = 0; i < 4; ++i) v.push_back(uint8_t(x >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& v, uint64_t x) {
  for (int i = 0; i < 8; ++i) v.push_back(uint8_t(x >> (8 * i)));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t x = 0;
  for (int i = 3; i >= 0; --i) x = (x << 8) | p[i];
  return x;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; --i) x = (x << 8) | p[i];
  return x;
}
static void store_u32(uint8_t* p, uint32_t x) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(x >> (8 * i));
}
static void store_u64(uint8_t* p, uint64_t x) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(x >> (8 * i));
}

uint64_t frame_check(const uint8_t* header16, uint64_t payload_hash) {
  uint8_t b[24];
  std::memcpy(b, header16, 16);
  store_u64(b + 16, payload_hash);
  return xxh3(b, sizeof b);
}

void encode_frame_header(uint32_t type, uint64_t len, uint64_t payload_hash, uint8_t out[24]) {
  store_u32(out, kFrameMagic);
  store_u32(out + 4, type);
  store_u64(out + 8, len);
  store_u64(out + 16, frame_check(out, payload_hash));
}

void set_timeouts(int fd, double seconds) {
  // Small frames (COMMIT, RUNNING, APPLIED) must not wait for Nagle and
  // delayed acknowledgments: that alone added ~40 ms to every downtime.
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{};
  tv.tv_sec = time_t(seconds);
  tv.tv_usec = suseconds_t((seconds - double(tv.tv_sec)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void watch_peer(int fd) {
  int on = 1, idle = 2, intvl = 1, cnt = 3;
  unsigned user_ms = kPeerDeadSeconds * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms);
}

static Error io_error(const char* what, int err) {
  if (err == EAGAIN || err == EWOULDBLOCK)
    return make_error(ETIMEDOUT, std::string(what) + ": timed out");
  return sys_error(what, err);
}

Status FrameWriter::send_iov(iovec* iov, size_t n) {
  size_t i = 0;
  while (i < n) {
    msghdr mh{};
    mh.msg_iov = iov + i;
    mh.msg_iovlen = std::min<size_t>(n - i, IOV_MAX);
    ssize_t done = ::sendmsg(fd_, &mh, MSG_NOSIGNAL);
    if (done < 0) {
      if (errno == EINTR) continue;
      return io_error("sending to the receiver", errno);
    }
    bytes_ += uint64_t(done);
    while (done > 0 && i < n) {
      if (size_t(done) >= iov[i].iov_len) {
        done -= ssize_t(iov[i].iov_len);
        ++i;
      } else {
        iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + done;
        iov[i].iov_len -= size_t(done);
        done = 0;
      }
    }
    while (i < n && iov[i].iov_len == 0) ++i;
  }
  return {};
}

Status FrameWriter::send(uint32_t type, const void* payload, size_t len) {
  uint8_t h[kFrameHeaderSize];
  encode_frame_header(type, len, xxh3(payload, len), h);
  iovec iov[2] = {{h, sizeof h}, {const_cast<void*>(payload), len}};
  return send_iov(iov, len ? 2 : 1);
}

Status FrameWriter::send_content(const iovec* in, const uint64_t* hashes, size_t n) {
  constexpr size_t kPerCall = 512;  // frames per sendmsg: 1024 iovecs
  std::vector<uint8_t> headers(std::min(n, kPerCall) * kFrameHeaderSize);
  std::vector<iovec> iov;
  for (size_t first = 0; first < n; first += kPerCall) {
    size_t k = std::min(kPerCall, n - first);
    iov.clear();
    for (size_t j = 0; j < k; ++j) {
      const iovec& d = in[first + j];
      uint8_t* h = &headers[j * kFrameHeaderSize];
      encode_frame_header(kContent, d.iov_len,
                          hashes ? hashes[first + j] : xxh3(d.iov_base, d.iov_len), h);
      iov.push_back({h, kFrameHeaderSize});
      iov.push_back(d);
    }
    CKPT_TRY(send_iov(iov.data(), iov.size()));
  }
  return {};
}

FrameReader::FrameReader(int fd) : fd_(fd), cap_(8 << 20) {
  void* p = ::mmap(nullptr, cap_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  buf_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

FrameReader::~FrameReader() {
  if (buf_) ::munmap(buf_, cap_);
}

// Makes `need` bytes available at begin_ (need <= cap_).
Status FrameReader::fill(size_t need) {
  if (!buf_) return make_error(ENOMEM, "no receive buffer");
  if (end_ - begin_ >= need) return {};
  if (begin_ + need > cap_) {
    if (before_refill_) CKPT_TRY(before_refill_());
    std::memmove(buf_, buf_ + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  while (end_ - begin_ < need) {
    // With a placement callback, read little ahead: large payloads should
    // land in their destination directly, not in this buffer.
    size_t room = cap_ - end_;
    if (place_) room = std::min(room, need - (end_ - begin_) + kReadAhead);
    ssize_t n = ::recv(fd_, buf_ + end_, room, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error("receiving", errno);
    }
    if (n == 0) return make_error(EPIPE, "stream truncated: the peer closed the connection");
    end_ += size_t(n);
    bytes_ += uint64_t(n);
  }
  return {};
}

bool FrameReader::readable() {
  if (end_ > begin_) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

// A payload straight into the caller's memory: what is buffered, then the
// rest from the socket.
Status FrameReader::receive_into(const Placement& at, uint64_t len) {
  size_t have = std::min<size_t>(end_ - begin_, len);
  if (at.fd >= 0) {
    // Into a file: written through the file, not its mapping, so no page is
    // zeroed on a fault before it is overwritten (docs/performance.md).
    CKPT_TRY(write_all(at.fd, buf_ + begin_, have, "the staging file", off_t(at.offset)));
    begin_ += have;
    if (have == len) return {};
    if (splice_ok_) {
      Status st = splice_into(at, have, len);
      if (st.ok() || !splice_ok_) return st;
    }
  } else {
    std::memcpy(at.mem, buf_ + begin_, have);
    begin_ += have;
  }
  while (have < len) {
    ssize_t n = ::recv(fd_, at.mem + have, len - have, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("receiving", errno);
    if (n == 0) return make_error(EPIPE, "stream truncated: the peer closed the connection");
    have += size_t(n);
    bytes_ += uint64_t(n);
  }
  return {};
}

// Socket -> pipe -> file: the socket's pages are copied once, by the file's
// write path. Clears splice_ok_ (and returns OK, nothing consumed) where
// splice is not possible; the caller then receives into memory.
Status FrameReader::splice_into(const Placement& at, uint64_t done, uint64_t len) {
  constexpr int kPipeSize = 1 << 20;  // a whole content frame per call
  if (!pipe_r_.valid()) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      splice_ok_ = false;
      return {};
    }
    pipe_r_.reset(p[0]);
    pipe_w_.reset(p[1]);
    (void)::fcntl(p[1], F_SETPIPE_SZ, kPipeSize);  // smaller pipes only cost more calls
  }
  bool moved = false;
  while (done < len) {
    // Drained after every call: the pipe's slots, one per socket buffer,
    // fill up long before its bytes do when packets are small.
    ssize_t n = ::splice(fd_, nullptr, pipe_w_.get(), nullptr,
                         std::min<uint64_t>(len - done, kPipeSize), SPLICE_F_MOVE);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && !moved && (errno == EINVAL || errno == ENOSYS)) {
      splice_ok_ = false;
      return {};
    }
    if (n < 0) return io_error("receiving", errno);
    if (n == 0) return make_error(EPIPE, "stream truncated: the peer closed the connection");
    moved = true;
    bytes_ += uint64_t(n);
    loff_t off = loff_t(at.offset + done);
    for (size_t in_pipe = size_t(n); in_pipe > 0;) {
      ssize_t w = ::splice(pipe_r_.get(), nullptr, at.fd, &off, in_pipe, SPLICE_F_MOVE);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return sys_error("writing the staging file");
      in_pipe -= size_t(w);
    }
    done += uint64_t(n);
  }
  return {};
}

Result<Frame> FrameReader::next(uint64_t max_len) {
  CKPT_TRY(fill(kFrameHeaderSize));
  const uint8_t* h = buf_ + begin_;
  if (get_u32(h) != kFrameMagic)
    return make_error(EBADMSG, "not a migration stream (bad frame magic)");
  Frame f;
  f.type = get_u32(h + 4);
  f.len = get_u64(h + 8);
  const uint64_t check = get_u64(h + 16);
  if (f.type < kHello || f.type > kLastFrameType)
    return make_error(EBADMSG, "unknown frame type " + std::to_string(f.type));
  uint64_t limit = max_len ? std::min(max_len, max_payload(f.type)) : max_payload(f.type);
  if (f.len > limit)
    return make_error(EBADMSG, std::string(frame_name(f.type)) + " frame too long (" +
                                   std::to_string(f.len) + " bytes)");
  uint8_t header[16];
  std::memcpy(header, h, 16);
  Placement at = place_ && f.len >= kReadAhead ? place_(f.type, f.len) : Placement{};
  if (at.mem) {
    begin_ += kFrameHeaderSize;
    CKPT_TRY(receive_into(at, f.len));
    f.data = at.mem;
  } else if (f.len + kFrameHeaderSize <= cap_) {
    CKPT_TRY(fill(kFrameHeaderSize + f.len));
    f.data = buf_ + begin_ + kFrameHeaderSize;
    begin_ += kFrameHeaderSize + f.len;
  } else {  // larger than the buffer (metadata of a huge process): read it whole
    begin_ += kFrameHeaderSize;
    size_t have = std::min<size_t>(end_ - begin_, f.len);
    big_.assign(buf_ + begin_, buf_ + begin_ + have);
    begin_ += have;
    while (have < f.len) {
      // The buffer grows with what arrived (doubling), not with what the
      // header announced: a peer that claims 1 GiB and sends nothing costs
      // this process nothing.
      if (have == big_.size())
        big_.resize(std::min<size_t>(f.len, std::max<size_t>(2 * have, 1 << 20)));
      ssize_t n = ::recv(fd_, big_.data() + have, big_.size() - have, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return io_error("receiving", errno);
      if (n == 0) return make_error(EPIPE, "stream truncated: the peer closed the connection");
      have += size_t(n);
      bytes_ += uint64_t(n);
    }
    f.data = big_.data();
  }
  if (frame_check(header, xxh3(f.data, f.len)) != check)
    return make_error(EBADMSG, std::string(frame_name(f.type)) + " frame checksum mismatch");
  return f;
}

Error unexpected_frame(const Frame& f, uint32_t expected, const std::string& peer) {
  if (f.type == kError)
    return make_error(ECONNABORTED,
                      peer + ": " + std::string(reinterpret_cast<const char*>(f.data), f.len));
  return make_error(EBADMSG, std::string("protocol error: expected ") + frame_name(expected) +
                                 ", got " + frame_name(f.type));
}

Result<Frame> expect(FrameReader& r, uint32_t type, const std::string& peer) {
  CKPT_ASSIGN(Frame f, r.next());
  if (f.type == type) return f;
  return unexpected_frame(f, type, peer);
}

Result<std::vector<uint8_t>> load_token(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return sys_error("token file " + path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return sys_error("token file " + path);
  if (!S_ISREG(st.st_mode))
    return make_error(EINVAL, "token file " + path + " is not a regular file");
  if (st.st_uid != ::geteuid())
    return make_error(EPERM, "token file " + path + " is not owned by this user (uid " +
                                 std::to_string(::geteuid()) + ")");
  if (st.st_mode & 077)
    return make_error(EPERM,
                      "token file " + path + " is readable or writable by others (chmod 600 it)");
  if (st.st_size < 16 || st.st_size > 4096)
    return make_error(EINVAL, "token file " + path + " must hold 16 to 4096 bytes");
  std::vector<uint8_t> t(size_t(st.st_size));
  CKPT_TRY(read_exact(fd.get(), t.data(), t.size(), 0, "token file " + path));
  return t;
}

Result<Mac> hmac(const std::vector<uint8_t>& token, const std::string& label, const uint8_t* a,
                 const uint8_t* b) {
  std::vector<uint8_t> msg(label.begin(), label.end());
  msg.insert(msg.end(), a, a + kNonceSize);
  msg.insert(msg.end(), b, b + kNonceSize);
  Mac out{};
  size_t out_len = 0;
  if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, token.data(), token.size(),
                 msg.data(), msg.size(), out.data(), out.size(), &out_len) ||
      out_len != out.size())
    return make_error(EIO, "HMAC-SHA256 failed (OpenSSL)");
  return out;
}

bool mac_equal(const uint8_t* x, const uint8_t* y) {
  return CRYPTO_memcmp(x, y, kMacSize) == 0;
}

Status split_host_port(const std::string& s, std::string* host, std::string* port) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size())
    return make_error(EINVAL, "address " + s + " is not HOST:PORT");
  *host = s.substr(0, colon);
  *port = s.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  if (host->empty()) return make_error(EINVAL, "address " + s + " has no host");
  return {};
}

}  // namespace ckpt::migrate
