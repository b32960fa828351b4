// tty/pty_queue: what a pty holds, taken out of one pty and put into
// another, read back as its programs would read it (lines per read, the
// typed line only once ended, the packet status first).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <string>

#include "tty/pty.hpp"
#include "tty/pty_queue.hpp"
#include "util/fd.hpp"

namespace {

using ckpt::UniqueFd;
using namespace ckpt::tty;

struct Pty {
  UniqueFd master, slave;
  Pty() {
    master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    int unlock = 0;
    ::ioctl(master.get(), TIOCSPTLCK, &unlock);
    slave.reset(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  }
  termios settings() const {
    termios t{};
    ::tcgetattr(slave.get(), &t);
    return t;
  }
};

// The next read of `fd` (there must be one within a second), or "<none>".
std::string next(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 1000) != 1) return "<none>";
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf);
  return n < 0 ? "<error>" : std::string(buf, size_t(n));
}
bool nothing(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 50) == 0;
}

void write_str(int fd, const std::string& s) {
  ASSERT_EQ(::write(fd, s.data(), s.size()), ssize_t(s.size()));
  ::usleep(20000);  // the line discipline takes it
}

TEST(PtyQueue, CanonicalLinesAndTypedLineMoveToAnotherPty) {
  if (!can_inject_input()) GTEST_SKIP() << "TIOCSTI needs CAP_SYS_ADMIN here";
  Pty a;
  termios t = a.settings();
  t.c_lflag &= ~tcflag_t(ECHO);
  t.c_cc[VEOL] = '@';
  ::tcsetattr(a.slave.get(), TCSANOW, &t);
  t = a.settings();
  write_str(a.master.get(), "one\ntwo@three\004\004par\177rtial");
  Queues q;
  ASSERT_TRUE(take(a.master.get(), a.slave.get(), t, true, &q, "a").ok());
  ASSERT_EQ(q.input.size(), 5u);
  EXPECT_EQ(q.input[0].bytes, "one\n");
  EXPECT_EQ(q.input[1].kind, Segment::kLine);
  EXPECT_EQ(q.input[2].kind, Segment::kEofLine);
  EXPECT_EQ(q.input[3].bytes, "");
  EXPECT_EQ(q.input[4].kind, Segment::kPartial);
  EXPECT_EQ(q.input[4].bytes, "partial");
  EXPECT_TRUE(nothing(a.slave.get()));  // taken out

  // Through a record, as a checkpoint stores it.
  ckpt::image::FileRecord f;
  f.params.assign(ckpt::image::kPtyParams, 0);
  store_queues(q, &f);
  EXPECT_EQ(f.kind, ckpt::image::FileKind::kPtyMasterQueued);
  auto back = load_queues(f, "a");
  ASSERT_TRUE(back.ok());

  Pty b;
  ::tcsetattr(b.slave.get(), TCSANOW, &t);
  ASSERT_TRUE(check_puttable(t, *back, "b").ok());
  ASSERT_TRUE(put(b.master.get(), b.slave.get(), t, *back, "b").ok());
  EXPECT_EQ(next(b.slave.get()), "one\n");
  EXPECT_EQ(next(b.slave.get()), "two@");
  EXPECT_EQ(next(b.slave.get()), "three");
  EXPECT_EQ(next(b.slave.get()), "");  // end of file
  EXPECT_TRUE(nothing(b.slave.get())) << "the typed line became readable before its end";
  write_str(b.master.get(), "!\n");
  EXPECT_EQ(next(b.slave.get()), "partial!\n");
  termios now = b.settings();
  EXPECT_EQ(now.c_lflag, t.c_lflag);
  EXPECT_EQ(now.c_cc[VEOF], t.c_cc[VEOF]);
}

TEST(PtyQueue, RawInputOutputAndPacketStatus) {
  if (!can_inject_input()) GTEST_SKIP() << "TIOCSTI needs CAP_SYS_ADMIN here";
  Pty a;
  termios t = a.settings();
  ::cfmakeraw(&t);
  ::tcsetattr(a.slave.get(), TCSANOW, &t);
  t = a.settings();
  int on = 1;
  ::ioctl(a.master.get(), TIOCPKT, &on);
  ::tcflush(a.slave.get(), TCIFLUSH);
  ::tcflow(a.slave.get(), TCOOFF);
  ::tcflow(a.slave.get(), TCOON);
  const std::string in("x\003\n\177\0y", 6), out("out\r\n\0z", 7);
  write_str(a.master.get(), in);
  write_str(a.slave.get(), out);
  Queues q;
  ASSERT_TRUE(take(a.master.get(), a.slave.get(), t, true, &q, "a").ok());
  EXPECT_TRUE(q.packet);
  EXPECT_EQ(q.status, TIOCPKT_FLUSHREAD | TIOCPKT_START);
  EXPECT_EQ(q.output, out);
  ASSERT_EQ(q.input.size(), 1u);
  EXPECT_EQ(q.input[0].bytes, in);

  Pty b;
  ::tcsetattr(b.slave.get(), TCSANOW, &t);
  ASSERT_TRUE(check_puttable(t, q, "b").ok());
  ASSERT_TRUE(put(b.master.get(), b.slave.get(), t, q, "b").ok());
  EXPECT_EQ(next(b.master.get()), std::string(1, char(TIOCPKT_FLUSHREAD | TIOCPKT_START)));
  EXPECT_EQ(next(b.master.get()), std::string(1, char(TIOCPKT_DATA)) + out);
  EXPECT_EQ(next(b.slave.get()), in);
}

TEST(PtyQueue, RefusesInputTheSettingsWouldActOn) {
  termios t{};
  t.c_lflag = ICANON;
  t.c_cc[VEOL] = '@';
  Queues q;
  q.input.push_back({Segment::kLine, "a@b\n"});  // '@' would end the line early
  auto s = check_puttable(t, q, "pty");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("which now ends a line"), std::string::npos)
      << s.error().message;
  Queues p;
  p.packet = true;
  p.status = TIOCPKT_STOP;
  EXPECT_FALSE(check_puttable(t, p, "pty").ok());
}

TEST(PtyQueue, OldRecordsAreAllOutput) {
  ckpt::image::FileRecord f;
  f.kind = ckpt::image::FileKind::kPtyMaster;
  f.params.assign(ckpt::image::kPtyParamsV1, 0);
  f.data = {'h', 'i'};
  auto q = load_queues(f, "old");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->output, "hi");
  EXPECT_TRUE(q->input.empty());
  EXPECT_FALSE(q->packet);
}

}  // namespace
