// The agent's side of the partner level (nodes/partner): names that may
// name copies, and requests that are malformed or ask for what is not
// there, answered in one step each without touching the store.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "image_test_util.hpp"
#include "nodes/partner.hpp"
#include "nodes/wire.hpp"

using namespace ckpt;
using namespace ckpt::nodes;

namespace {

// serve_partner on one end of a socketpair; the answer read on the other.
struct Exchange {
  int sv[2] = {-1, -1};
  Exchange() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0); }
  ~Exchange() {
    ::close(sv[0]);
    ::close(sv[1]);
  }
  Result<Message> ask(const AgentConfig& cfg, const Message& req) {
    // Nothing follows the request: an agent that wrongly waits for more
    // reads the end of the stream instead of blocking the test.
    ::shutdown(sv[1], SHUT_WR);
    migrate::FrameWriter w(sv[0]);
    migrate::FrameReader r(sv[0]);
    (void)serve_partner(w, r, cfg, req);
    migrate::FrameReader answer(sv[1]);
    return read_step(answer, "agent");
  }
};

bool exists(const std::string& p) {
  return ::access(p.c_str(), F_OK) == 0;
}

}  // namespace

TEST(Partner, PartNames) {
  for (const char* good : {"job-7", "run-0123456789abcdef", "j12.s0.t3", "A_b"})
    EXPECT_TRUE(valid_part_name(good)) << good;
  for (const std::string& bad : {std::string(), std::string(".hidden"), std::string(".."),
                                 std::string("a/b"), std::string("../x"), std::string("a b"),
                                 std::string("x\n"), std::string("é"), std::string(129, 'a')})
    EXPECT_FALSE(valid_part_name(bad)) << bad;
  EXPECT_TRUE(valid_part_name(std::string(128, 'a')));
}

TEST(Partner, MalformedStoreIsRefusedWithoutTouchingTheStore) {
  ckpt::testing::TempDir d;
  AgentConfig cfg;
  cfg.dir = d.path();
  for (const std::string& text :
       {std::string("job-7"), std::string("job-7 short"),
        std::string("../x 0123456789abcdef0123456789abcdef"), std::string("job-7  ")}) {
    Exchange x;
    auto m = x.ask(cfg, {kStore, 1, 1, text});
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->step, uint32_t(kFailed)) << text;
    EXPECT_NE(m->text.find("malformed STORE request"), std::string::npos) << m->text;
  }
  Exchange x;
  auto m = x.ask(cfg, {kStore, 0, 1, "job-7 0123456789abcdef0123456789abcdef"});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->step, uint32_t(kFailed));
  EXPECT_FALSE(exists(d.path() + "/partners"));
}

TEST(Partner, NothingHeldIsSaidSo) {
  ckpt::testing::TempDir d;
  AgentConfig cfg;
  cfg.dir = d.path();
  {
    Exchange x;
    auto m = x.ask(cfg, {kQuery, 0, 0, "job-7"});
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->step, uint32_t(kHolding));
    EXPECT_EQ(m->a, 0u);
    EXPECT_EQ(m->b, 0u);
  }
  {
    Exchange x;
    auto m = x.ask(cfg, {kFetch, 0, 0, "job-7"});
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->step, uint32_t(kFailed));
    EXPECT_NE(m->text.find("no copy of job-7"), std::string::npos) << m->text;
  }
  {
    Exchange x;
    auto m = x.ask(cfg, {kQuery, 0, 0, "../escape"});
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(m->step, uint32_t(kFailed));
  }
  {
    Exchange x;
    auto m = x.ask(cfg, {kDrop, 0, 0, "job-7"});
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->step, uint32_t(kHolding));
    EXPECT_FALSE(exists(d.path() + "/partners/job-7"));
  }
}
