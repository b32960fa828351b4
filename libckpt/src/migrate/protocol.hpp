// The migration stream (spec: docs/migration.md): length-prefixed frames,
// each with an xxh3 check, over one TCP connection; peers authenticate each
// other by HMAC-SHA256 challenge-response over a shared token file.
#pragma once

#include <sys/uio.h>

#include <array>
#include <ckpt/result.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/fd.hpp"

namespace ckpt::migrate {

constexpr uint32_t kFrameMagic = 0x474D4B89;  // bytes 89 4B 4D 47: "\x89KMG"
constexpr uint32_t kProtocolVersion = 1;
constexpr size_t kFrameHeaderSize = 24;
constexpr size_t kNonceSize = 32;
constexpr size_t kMacSize = 32;

enum FrameType : uint32_t {
  kHello = 1,      // s->r: u32 version, u32 0, nonce[32]
  kChallenge = 2,  // r->s: u32 version, u32 features (kFeature*), nonce[32]
  kAuth = 3,       // s->r: mac[32]
  kAuthOk = 4,     // r->s: mac[32], u64 first generation number to use
  kGenBegin = 5,   // s->r: u64 generation, u64 parent, chain_id[16]
  kContent = 6,    // s->r: page content bytes (pages.img after its header), in order
  kGenFiles = 7,   // s->r: u64 n + pages.img header, u64 n + addr.img, u64 n + meta.img
  kCommit = 8,     // s->r: u64 generation to restore (the last one sent)
  kRunning = 9,    // r->s: i32 pid of the restored process
  kError = 10,     // either way: a one-line reason; the session ends
  kDone = 11,      // s->r: the source process has ended
  kApplied = 12,   // r->s: u64 generation: the receiver's process holds it (warm restore)
  // A job (cr_migrate --tree, migrate/job_stream): each generation's files as they are on disk.
  kJobBegin = 13,  // s->r: u64 generation
  kJobFile = 14,   // s->r: u32 n, path[n] (relative), u64 offset, bytes
  kJobEnd = 15,    // s->r: u64 generation: all its files were sent
  // A job across nodes (cr_job <-> cr_noded, nodes/wire.hpp): one step of the round.
  kNodeStep = 16,  // either way: u32 step, u32 0, u64 a, u64 b, text
  // Metadata first (a frozen migration's full): the receiver builds the
  // process from the layout and writes each run into it as it arrives.
  kGenLayout = 17,  // s->r, right after GEN_BEGIN: u64 record count + meta.img's records
  kGenRuns = 18,    // s->r: n x (u64 vaddr, u64 bytes): the next n CONTENT frames' addresses
};
constexpr uint32_t kLastFrameType = kGenRuns;
const char* frame_name(uint32_t type);

// What a receiver accepts beyond version 1's frames (CHALLENGE's second
// word; receivers that predate it send 0, and get none of it).
constexpr uint32_t kFeatureLayoutFirst = 1;  // GEN_LAYOUT and GEN_RUNS

// Largest payload a receiver accepts, per frame type.
uint64_t max_payload(uint32_t type);

// The check of a frame: xxh3 of header bytes 0-15 followed by xxh3(payload).
uint64_t frame_check(const uint8_t* header16, uint64_t payload_hash);
void encode_frame_header(uint32_t type, uint64_t len, uint64_t payload_hash, uint8_t out[24]);

// Sending side of a connection; counts the bytes it sent.
class FrameWriter {
 public:
  explicit FrameWriter(int fd) : fd_(fd) {}
  Status send(uint32_t type, const void* payload, size_t len);
  // One kContent frame per iovec, in as few sendmsg calls as possible.
  // `hashes`: xxh3 of each iovec when the caller has them (else nullptr).
  Status send_content(const iovec* iov, const uint64_t* hashes, size_t n);
  uint64_t bytes() const { return bytes_; }

 private:
  Status send_iov(iovec* iov, size_t n);
  int fd_;
  uint64_t bytes_ = 0;
};

struct Frame {
  uint32_t type = 0;
  const uint8_t* data = nullptr;  // valid until the next next()
  uint64_t len = 0;
};

// Receiving side: reads frames through a large buffer and checks each one
// (magic, known type, length limit, check) before returning it.
class FrameReader {
 public:
  explicit FrameReader(int fd);
  ~FrameReader();
  // `max_len`: 0 means max_payload(type).
  Result<Frame> next(uint64_t max_len = 0);
  // Whether a frame (or part of one) can be read without blocking.
  bool readable();
  // Called before buffered payloads are overwritten (to flush writes that point into them).
  void set_before_refill(std::function<Status()> f) { before_refill_ = std::move(f); }
  // Where a frame's payload should be received, asked for payloads of at
  // least kReadAhead bytes: `mem` (nullptr: into the buffer as usual) and,
  // when `mem` maps a file, that file and offset. The payload is checked at
  // `mem` after it arrived.
  struct Placement {
    uint8_t* mem = nullptr;
    int fd = -1;
    uint64_t offset = 0;
  };
  using Place = std::function<Placement(uint32_t type, uint64_t len)>;
  void set_place(Place p) { place_ = std::move(p); }
  static constexpr size_t kReadAhead = 64 << 10;
  uint64_t bytes() const { return bytes_; }

 private:
  Status fill(size_t need);
  Status receive_into(const Placement& at, uint64_t len);
  Status splice_into(const Placement& at, uint64_t done, uint64_t len);
  int fd_;
  UniqueFd pipe_r_, pipe_w_;  // for splice_into
  bool splice_ok_ = true;
  uint8_t* buf_;
  size_t cap_, begin_ = 0, end_ = 0;
  std::vector<uint8_t> big_;
  std::function<Status()> before_refill_;
  Place place_;
  uint64_t bytes_ = 0;
};

// Reads a frame of the expected type; a kError frame becomes an Error with
// the peer's message, any other type a protocol error.
// The error for frame `f` where `expected` should have come: the peer's own
// message for an ERROR frame, else a protocol error naming both.
Error unexpected_frame(const Frame& f, uint32_t expected, const std::string& peer);
Result<Frame> expect(FrameReader& r, uint32_t type, const std::string& peer);

// The shared secret: the whole content of FILE, which must be a regular file
// owned by this user and not accessible by group or others.
Result<std::vector<uint8_t>> load_token(const std::string& path);

using Mac = std::array<uint8_t, kMacSize>;
// HMAC-SHA256(token, label || a || b).
Result<Mac> hmac(const std::vector<uint8_t>& token, const std::string& label, const uint8_t* a,
                 const uint8_t* b);
bool mac_equal(const uint8_t* x, const uint8_t* y);

// "HOST:PORT" or "[V6ADDR]:PORT".
Status split_host_port(const std::string& s, std::string* host, std::string* port);

// Little-endian helpers for payloads.
void put_u32(std::vector<uint8_t>& v, uint32_t x);
void put_u64(std::vector<uint8_t>& v, uint64_t x);
uint32_t get_u32(const uint8_t* p);
uint64_t get_u64(const uint8_t* p);

// Socket timeouts for send and receive (seconds), and TCP_NODELAY.
void set_timeouts(int fd, double seconds);
// A peer that is gone (its node down, the link cut) noticed within about
// kPeerDeadSeconds, however long the step timeout: TCP keepalive probes
// while the link is idle, and TCP_USER_TIMEOUT for data left unacknowledged.
// A peer that is merely slow (its kernel still acknowledges) is not affected.
constexpr int kPeerDeadSeconds = 5;
void watch_peer(int fd);

}  // namespace ckpt::migrate
