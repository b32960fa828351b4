// The migration stream's frames, token rules, HMAC handshake pieces and the
// receiver's seccomp allowlist.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "image/format.hpp"
#include "migrate/protocol.hpp"
#include "migrate/sandbox.hpp"
#include "util/hash.hpp"

using namespace ckpt;
using namespace ckpt::migrate;

namespace {

struct Pair {
  int a = -1, b = -1;
  Pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a = sv[0];
    b = sv[1];
  }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
};

void raw_send(int fd, const std::vector<uint8_t>& v) {
  ASSERT_EQ(::send(fd, v.data(), v.size(), MSG_NOSIGNAL), ssize_t(v.size()));
}

std::vector<uint8_t> frame(uint32_t type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> f(kFrameHeaderSize);
  encode_frame_header(type, payload.size(), xxh3(payload.data(), payload.size()), f.data());
  f.insert(f.end(), payload.begin(), payload.end());
  return f;
}

}  // namespace

TEST(MigrateFrames, RoundTrip) {
  Pair p;
  FrameWriter w(p.a);
  FrameReader r(p.b);
  std::vector<uint8_t> hello(8 + kNonceSize, 7);
  ASSERT_TRUE(w.send(kHello, hello.data(), hello.size()).ok());
  std::vector<uint8_t> page(4096 * 3);
  for (size_t i = 0; i < page.size(); ++i) page[i] = uint8_t(i * 31);
  iovec iov[2] = {{page.data(), 4096}, {page.data() + 4096, 8192}};
  uint64_t hashes[2] = {xxh3(page.data(), 4096), xxh3(page.data() + 4096, 8192)};
  ASSERT_TRUE(w.send_content(iov, hashes, 2).ok());
  ASSERT_TRUE(w.send_content(iov, nullptr, 1).ok());
  EXPECT_EQ(w.bytes(), 4 * kFrameHeaderSize + hello.size() + 3 * 4096 + 4096);

  auto f = r.next();
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->type, kHello);
  EXPECT_EQ(std::vector<uint8_t>(f->data, f->data + f->len), hello);
  for (size_t want : {4096u, 8192u, 4096u}) {
    auto c = r.next();
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->type, kContent);
    EXPECT_EQ(c->len, want);
  }
}

TEST(MigrateFrames, PlacedPayloadLandsInCallerMemory) {
  Pair p;
  FrameWriter w(p.a);
  FrameReader r(p.b);
  std::vector<uint8_t> big(256 << 10);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i ^ (i >> 8));
  std::vector<uint8_t> dst(big.size());
  r.set_place([&](uint32_t type, uint64_t len) {
    FrameReader::Placement at;
    if (type == kContent && len == dst.size()) at.mem = dst.data();
    return at;
  });
  iovec iov{big.data(), big.size()};
  std::thread t([&] { ASSERT_TRUE(w.send_content(&iov, nullptr, 1).ok()); });
  auto f = r.next();
  t.join();
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->data, dst.data());
  EXPECT_EQ(dst, big);
}

// A placement in a file: the payload goes socket -> pipe -> file at the
// offset (what cr_recv does with pages.img) and is checked in the mapping.
TEST(MigrateFrames, PlacedPayloadLandsInCallerFile) {
  Pair p;
  FrameWriter w(p.a);
  FrameReader r(p.b);
  std::vector<uint8_t> big(image::kMaxRunPages * image::kPageSize);  // the largest frame
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7 ^ (i >> 12));
  int fd = ::memfd_create("placed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  const uint64_t off = 4096;
  ASSERT_EQ(::ftruncate(fd, off_t(off + big.size())), 0);
  void* m = ::mmap(nullptr, off + big.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  uint8_t* mem = static_cast<uint8_t*>(m) + off;
  r.set_place([&](uint32_t, uint64_t) { return FrameReader::Placement{mem, fd, off}; });
  iovec iov{big.data(), big.size()};
  std::thread t([&] { ASSERT_TRUE(w.send_content(&iov, nullptr, 1).ok()); });
  auto f = r.next();
  t.join();
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->data, mem);
  EXPECT_EQ(0, std::memcmp(mem, big.data(), big.size()));
  EXPECT_EQ(r.bytes(), kFrameHeaderSize + big.size());

  // Sent in small pieces: one pipe slot per socket buffer, so the pipe fills
  // by slots long before 1 MiB (this hung before the reader drained it).
  {
    Pair s3;
    FrameReader r3(s3.b);
    std::memset(mem, 0, big.size());
    r3.set_place([&](uint32_t, uint64_t) { return FrameReader::Placement{mem, fd, off}; });
    std::vector<uint8_t> all = frame(kContent, big);
    std::thread t3([&] {
      for (size_t at = 0; at < all.size(); at += 1000) {
        size_t n = std::min<size_t>(1000, all.size() - at);
        ASSERT_EQ(::send(s3.a, all.data() + at, n, MSG_NOSIGNAL), ssize_t(n));
      }
    });
    auto h = r3.next();
    t3.join();
    ASSERT_TRUE(h.ok()) << h.error().message;
    EXPECT_EQ(0, std::memcmp(mem, big.data(), big.size()));
  }

  // Cut in the middle of a spliced payload: a truncated stream, not a frame.
  Pair q;
  FrameReader r2(q.b);
  r2.set_place([&](uint32_t, uint64_t) { return FrameReader::Placement{mem, fd, off}; });
  std::vector<uint8_t> whole = frame(kContent, big);
  whole.resize(kFrameHeaderSize + big.size() / 2);
  std::thread t2([&] {
    raw_send(q.a, whole);
    ::shutdown(q.a, SHUT_WR);
  });
  auto g = r2.next();
  t2.join();
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("truncated"), std::string::npos) << g.error().message;
  ::munmap(m, off + big.size());
  ::close(fd);
}

TEST(MigrateFrames, CorruptionIsRefused) {
  std::vector<uint8_t> payload(32, 1);
  {
    Pair p;
    auto f = frame(kAuth, payload);
    f[kFrameHeaderSize + 5] ^= 1;  // payload changed, check not
    raw_send(p.a, f);
    auto r = FrameReader(p.b).next();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("checksum mismatch"), std::string::npos) << r.error().message;
  }
  {
    Pair p;
    auto f = frame(kAuth, payload);
    f[0] ^= 0xff;
    raw_send(p.a, f);
    auto r = FrameReader(p.b).next();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("bad frame magic"), std::string::npos);
  }
  {
    Pair p;
    raw_send(p.a, frame(99, payload));
    auto r = FrameReader(p.b).next();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("unknown frame type 99"), std::string::npos);
  }
  {
    Pair p;
    raw_send(p.a, frame(kAuth, std::vector<uint8_t>(33)));  // AUTH is 32 bytes at most
    auto r = FrameReader(p.b).next();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("too long"), std::string::npos);
  }
  {
    Pair p;
    auto f = frame(kContent, std::vector<uint8_t>(4096, 3));
    f.resize(f.size() - 100);
    raw_send(p.a, f);
    ::close(p.a);
    p.a = -1;
    auto r = FrameReader(p.b).next();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("stream truncated"), std::string::npos);
  }
}

// A frame that announces much and sends little costs the reader what
// arrived, not what was announced (issue 13: an authenticated sender made
// cr_recv allocate and zero 1 GiB with one header). Measured in a child,
// whose peak resident size starts at its own size.
TEST(MigrateFrames, AnnouncedLengthIsNotAllocatedUpFront) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto hwm_kib = [] {
      FILE* f = std::fopen("/proc/self/status", "r");
      char line[256];
      long kib = -1;
      while (f && std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
      if (f) std::fclose(f);
      return kib;
    };
    Pair p;
    std::vector<uint8_t> head(kFrameHeaderSize);
    encode_frame_header(kGenFiles, 512ull << 20, 0, head.data());
    head.resize(head.size() + (256 << 10), 5);  // 256 KiB of the 512 MiB announced
    const long before = hwm_kib();
    std::thread sender([&] {
      (void)::send(p.a, head.data(), head.size(), MSG_NOSIGNAL);
      ::close(p.a);
    });
    auto r = FrameReader(p.b).next();
    sender.join();
    p.a = -1;
    const long grown = hwm_kib() - before;
    bool truncated = !r.ok() && r.error().message.find("stream truncated") != std::string::npos;
    ::_exit(truncated && grown >= 0 && grown < (64 << 10) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the reader grew its peak by 64 MiB or more, or did not report the truncation";
}

TEST(MigrateAuth, TokenFileMustBeOwnerOnly) {
  char dir[] = "/tmp/migrate-token-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/tok";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "0123456789abcdef0123456789abcdef", 32), 32);
  ::close(fd);
  auto ok = load_token(path);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->size(), 32u);
  ::chmod(path.c_str(), 0640);
  auto open = load_token(path);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.error().message.find("chmod 600"), std::string::npos);
  ::chmod(path.c_str(), 0600);
  ::truncate(path.c_str(), 8);
  EXPECT_FALSE(load_token(path).ok());  // too short to be a secret
  EXPECT_FALSE(load_token(std::string(dir) + "/missing").ok());
  ::unlink(path.c_str());
  ::rmdir(dir);
}

TEST(MigrateAuth, MacDependsOnKeyLabelAndNonces) {
  std::vector<uint8_t> k1(32, 1), k2(32, 2);
  uint8_t a[kNonceSize], b[kNonceSize];
  std::memset(a, 0xaa, sizeof a);
  std::memset(b, 0xbb, sizeof b);
  auto m = hmac(k1, "ckpt-migrate-v1 sender", a, b);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(mac_equal(m->data(), hmac(k1, "ckpt-migrate-v1 sender", a, b)->data()));
  EXPECT_FALSE(mac_equal(m->data(), hmac(k2, "ckpt-migrate-v1 sender", a, b)->data()));
  EXPECT_FALSE(mac_equal(m->data(), hmac(k1, "ckpt-migrate-v1 receiver", a, b)->data()));
  EXPECT_FALSE(mac_equal(m->data(), hmac(k1, "ckpt-migrate-v1 sender", b, a)->data()));
}

TEST(MigrateSandbox, AllowlistKillsOtherCalls) {
  // Allowed calls work under the filter...
  pid_t ok = ::fork();
  if (ok == 0) {
    if (!apply_receiver_sandbox(::testing::TempDir()).ok()) ::_exit(2);
    char buf[16] = "x";
    int sv[2];
    (void)sv;
    if (::write(STDERR_FILENO, buf, 0) != 0) ::_exit(3);
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(ok, &st, 0), ok);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  // ... anything else kills the process.
  pid_t bad = ::fork();
  if (bad == 0) {
    if (!apply_receiver_sandbox(::testing::TempDir()).ok()) ::_exit(2);
    ::syscall(SYS_getppid);
    ::_exit(0);
  }
  ASSERT_EQ(::waitpid(bad, &st, 0), bad);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS) << st;
}
