// What cr_recv reads from the network before and after authentication: the
// receiver's handshake (byte 0 even: accept_sender, the gatekeeper's code)
// and the frame reader of the session (byte 0 odd: FrameReader::next until
// the stream ends or is refused), fed the input through a socket.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include <cstdio>
#include <string>

#include "migrate/handshake.hpp"
#include "migrate/protocol.hpp"
#include "util/clock.hpp"
#include "util/hash.hpp"

using namespace ckpt::migrate;

namespace {

void add_frame(std::vector<uint8_t>& s, uint32_t type, const std::vector<uint8_t>& payload) {
  uint8_t h[kFrameHeaderSize];
  encode_frame_header(type, payload.size(), ckpt::xxh3(payload.data(), payload.size()), h);
  s.insert(s.end(), h, h + sizeof h);
  s.insert(s.end(), payload.begin(), payload.end());
}

void save(const std::string& dir, const char* name, uint8_t mode, const std::vector<uint8_t>& s) {
  std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  std::fputc(mode, f);
  std::fwrite(s.data(), 1, s.size(), f);
  std::fclose(f);
}

}  // namespace

// With $CKPT_FUZZ_SEEDS set, writes seed streams there first (libFuzzer
// reads its corpus after this): a handshake as a sender starts it, and a
// session's frames (a generation's begin, runs, content, files, commit, done).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("CKPT_FUZZ_SEEDS");
  if (!dir) return 0;
  std::vector<uint8_t> hello;
  put_u32(hello, kProtocolVersion);
  put_u32(hello, 0);
  hello.resize(8 + kNonceSize, 0x11);
  std::vector<uint8_t> hs;
  add_frame(hs, kHello, hello);
  add_frame(hs, kAuth, std::vector<uint8_t>(kMacSize, 0x22));
  save(dir, "handshake", 0, hs);
  std::vector<uint8_t> session, gb;
  put_u64(gb, 1);
  put_u64(gb, 0);
  gb.resize(32, 0x33);
  add_frame(session, kGenBegin, gb);
  std::vector<uint8_t> runs;  // metadata first: the next CONTENT frame's address
  put_u64(runs, 0x400000);
  put_u64(runs, 4096);
  add_frame(session, kGenRuns, runs);
  add_frame(session, kContent, std::vector<uint8_t>(4096, 0x44));
  std::vector<uint8_t> files;
  for (size_t n : {size_t(64), size_t(40), size_t(80)}) {
    put_u64(files, n);
    files.resize(files.size() + n, 0x55);
  }
  add_frame(session, kGenFiles, files);
  std::vector<uint8_t> commit;
  put_u64(commit, 1);
  add_frame(session, kCommit, commit);
  add_frame(session, kDone, {});
  save(dir, "session", 1, session);
  std::string err = "stopped";
  std::vector<uint8_t> e;
  add_frame(e, kError, std::vector<uint8_t>(err.begin(), err.end()));
  save(dir, "error", 1, e);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 100000) return 0;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  int buf = 1 << 20;
  ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  ::setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  if (::send(sv[1], data + 1, size - 1, MSG_NOSIGNAL) != ssize_t(size - 1)) std::abort();
  ::shutdown(sv[1], SHUT_WR);
  if (data[0] % 2 == 0) {
    static const std::vector<uint8_t> token(32, 0x5a);
    (void)ckpt::migrate::accept_sender(sv[0], token, ckpt::now_seconds() + 1);
  } else {
    ckpt::migrate::FrameReader r(sv[0]);
    for (int i = 0; i < 10000; ++i) {
      auto f = r.next();
      if (!f.ok()) break;
    }
  }
  ::close(sv[0]);
  ::close(sv[1]);
  return 0;
}
