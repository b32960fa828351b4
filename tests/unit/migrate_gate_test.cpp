// cr_recv's gate: which unauthenticated connections are kept (admission),
// and the receiver's handshake (exact reads, deadline, refusals).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "migrate/admission.hpp"
#include "migrate/handshake.hpp"
#include "migrate/landlock.hpp"
#include "migrate/protocol.hpp"
#include "migrate/sandbox.hpp"
#include "util/clock.hpp"
#include "util/hash.hpp"

using namespace ckpt;
using namespace ckpt::migrate;

TEST(MigrateAdmission, OneSourceOnlyPushesOutItsOwnOldest) {
  Admission a(8, 3);
  EXPECT_TRUE(a.admit(1, "10.0.0.9").empty());  // the sender
  for (uint64_t id = 2; id <= 4; ++id) EXPECT_TRUE(a.admit(id, "10.0.0.66").empty());
  // The flooder's fourth connection drops its own oldest, never the sender's.
  EXPECT_EQ(a.admit(5, "10.0.0.66"), std::vector<uint64_t>{2});
  EXPECT_EQ(a.admit(6, "10.0.0.66"), std::vector<uint64_t>{3});
  EXPECT_EQ(a.from("10.0.0.66"), 3u);
  EXPECT_EQ(a.from("10.0.0.9"), 1u);
  EXPECT_EQ(a.size(), 4u);
}

TEST(MigrateAdmission, FullGateDropsFromTheBusiestSource) {
  Admission a(4, 4);
  EXPECT_TRUE(a.admit(1, "A").empty());
  EXPECT_TRUE(a.admit(2, "B").empty());
  EXPECT_TRUE(a.admit(3, "B").empty());
  EXPECT_TRUE(a.admit(4, "C").empty());
  // Full: B holds the most, its oldest goes (not A's, although older).
  EXPECT_EQ(a.admit(5, "D"), std::vector<uint64_t>{2});
  // Now A, B, C, D hold one each: the oldest of all goes.
  EXPECT_EQ(a.admit(6, "E"), std::vector<uint64_t>{1});
  a.remove(3);
  EXPECT_TRUE(a.admit(7, "F").empty());
  EXPECT_EQ(a.size(), 4u);
  EXPECT_EQ(a.from("B"), 0u);
}

namespace {

std::vector<uint8_t> frame(uint32_t type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> f(kFrameHeaderSize);
  encode_frame_header(type, payload.size(), xxh3(payload.data(), payload.size()), f.data());
  f.insert(f.end(), payload.begin(), payload.end());
  return f;
}

struct Pair {
  int a = -1, b = -1;
  Pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a = sv[0];
    b = sv[1];
  }
  ~Pair() {
    ::close(a);
    if (b >= 0) ::close(b);
  }
};

}  // namespace

TEST(MigrateHandshake, AuthenticatesAndReadsNothingPastAuth) {
  const std::vector<uint8_t> token(32, 5);
  Pair p;
  std::thread sender([&] {
    uint8_t mine[kNonceSize];
    std::memset(mine, 0x42, sizeof mine);
    std::vector<uint8_t> hello;
    put_u32(hello, kProtocolVersion);
    put_u32(hello, 0);
    hello.insert(hello.end(), mine, mine + kNonceSize);
    auto f = frame(kHello, hello);
    ASSERT_EQ(::send(p.b, f.data(), f.size(), 0), ssize_t(f.size()));
    FrameReader r(p.b);
    auto ch = r.next();
    ASSERT_TRUE(ch.ok());
    auto mac = hmac(token, "ckpt-migrate-v1 sender", ch->data + 8, mine);
    ASSERT_TRUE(mac.ok());
    // AUTH and, right behind it, bytes the session handler must get.
    auto a = frame(kAuth, std::vector<uint8_t>(mac->begin(), mac->end()));
    a.insert(a.end(), {'n', 'e', 'x', 't'});
    ASSERT_EQ(::send(p.b, a.data(), a.size(), 0), ssize_t(a.size()));
  });
  auto proof = accept_sender(p.a, token, now_seconds() + 5);
  sender.join();
  ASSERT_TRUE(proof.ok()) << proof.error().message;
  char rest[8] = {};
  EXPECT_EQ(::recv(p.a, rest, sizeof rest, MSG_DONTWAIT), 4);
  EXPECT_EQ(std::string(rest, 4), "next");
}

TEST(MigrateHandshake, WrongMacRefused) {
  const std::vector<uint8_t> token(32, 5);
  Pair p;
  std::vector<uint8_t> hello;
  put_u32(hello, kProtocolVersion);
  put_u32(hello, 0);
  hello.resize(8 + kNonceSize, 1);
  auto f = frame(kHello, hello);
  auto a = frame(kAuth, std::vector<uint8_t>(kMacSize, 9));
  f.insert(f.end(), a.begin(), a.end());
  ASSERT_EQ(::send(p.b, f.data(), f.size(), 0), ssize_t(f.size()));
  auto proof = accept_sender(p.a, token, now_seconds() + 5);
  ASSERT_FALSE(proof.ok());
  EXPECT_NE(proof.error().message.find("authentication failed"), std::string::npos);
}

TEST(MigrateHandshake, SilentAndSlowPeersMeetTheDeadline) {
  const std::vector<uint8_t> token(32, 5);
  Pair p;
  // Half a HELLO, then nothing: refused at the deadline, not later.
  std::vector<uint8_t> hello(8 + kNonceSize, 0);
  auto f = frame(kHello, hello);
  ASSERT_EQ(::send(p.b, f.data(), 30, 0), 30);
  const double t0 = now_seconds();
  auto proof = accept_sender(p.a, token, t0 + 0.3);
  const double took = now_seconds() - t0;
  ASSERT_FALSE(proof.ok());
  EXPECT_EQ(proof.error().code, ETIMEDOUT);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 1.5);
}

TEST(MigrateHandshake, HeaderChecks) {
  uint8_t h[kFrameHeaderSize];
  encode_frame_header(kHello, 40, 0, h);
  EXPECT_TRUE(decode_frame_header(h, 40).ok());
  EXPECT_FALSE(decode_frame_header(h, 39).ok());  // longer than the caller allows
  encode_frame_header(kContent, 2u << 20, 0, h);
  EXPECT_FALSE(decode_frame_header(h, 0).ok());  // longer than CONTENT may be
  encode_frame_header(99, 0, 0, h);
  EXPECT_FALSE(decode_frame_header(h, 0).ok());
  h[0] ^= 1;
  EXPECT_NE(decode_frame_header(h, 0).error().message.find("magic"), std::string::npos);
}

// The session handler's sandbox reaches files only beneath its staging
// directory (Landlock); the gatekeeper's reaches none.
TEST(MigrateSandbox, LandlockConfinesHandlers) {
  if (landlock_abi() == 0) GTEST_SKIP() << "this kernel has no Landlock";
  char tmpl[] = "/tmp/ckpt-landlock-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string staging = tmpl;
  pid_t session = ::fork();
  if (session == 0) {
    if (!apply_receiver_sandbox(staging).ok()) ::_exit(2);
    int in = ::open((staging + "/pages.img").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (in < 0) ::_exit(3);
    if (::mkdir((staging + "/gen-000001").c_str(), 0700) != 0) ::_exit(4);
    if (::open("/etc/passwd", O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES) ::_exit(5);
    if (::open("/tmp/ckpt-landlock-escape", O_WRONLY | O_CREAT | O_CLOEXEC, 0600) >= 0) ::_exit(6);
    if (::open((staging + "/../ckpt-landlock-escape").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC,
               0600) >= 0)
      ::_exit(7);
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(session, &st, 0), session);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  pid_t gate = ::fork();
  if (gate == 0) {
    if (!apply_gate_sandbox().ok()) ::_exit(2);
    // openat is not even in the gatekeeper's seccomp allowlist: SIGSYS.
    (void)::open((staging + "/pages.img").c_str(), O_RDONLY | O_CLOEXEC);
    ::_exit(0);
  }
  ASSERT_EQ(::waitpid(gate, &st, 0), gate);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) << "status " << st;
  ::unlink((staging + "/pages.img").c_str());
  ::rmdir((staging + "/gen-000001").c_str());
  ::rmdir(staging.c_str());
  ::unlink("/tmp/ckpt-landlock-escape");
}

namespace {

// The Cap* lines of /proc/PID/status, as "CapInh:..|CapPrm:..|...".
std::string capability_lines(pid_t pid) {
  FILE* f = ::fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "re");
  if (!f) return "unreadable";
  std::string out;
  char line[256];
  while (::fgets(line, sizeof line, f))
    if (std::strncmp(line, "Cap", 3) == 0) out += line;
  ::fclose(f);
  return out;
}

// Runs `sandbox` in a child that then waits; returns its capability lines.
template <class Sandbox>
std::string capabilities_under(Sandbox sandbox) {
  int ready[2], go[2];
  if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0) return "pipe failed";
  pid_t child = ::fork();
  if (child == 0) {
    ::close(go[1]);  // so that the parent's close is our EOF
    char c = sandbox().ok() ? 'y' : 'n';
    (void)::write(ready[1], &c, 1);
    (void)::read(go[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  (void)::read(ready[0], &c, 1);
  std::string caps = c == 'y' ? capability_lines(child) : "the sandbox failed";
  ::close(go[1]);
  int st = 0;
  ::waitpid(child, &st, 0);
  for (int fd : {ready[0], ready[1], go[0]}) ::close(fd);
  return caps;
}

}  // namespace

// The handlers keep uid 0 (their files stay root's) but hold no capability,
// and cannot get one back: bounding and ambient sets are empty too.
TEST(MigrateSandbox, HandlersHoldNoCapabilities) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a non-root handler has nothing to drop";
  const std::string none =
      "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
      "CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n";
  char tmpl[] = "/tmp/ckpt-caps-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string staging = tmpl;
  EXPECT_EQ(capabilities_under([&] { return apply_receiver_sandbox(staging); }), none);
  EXPECT_EQ(capabilities_under([] { return apply_gate_sandbox(); }), none);
  ::rmdir(staging.c_str());
}
