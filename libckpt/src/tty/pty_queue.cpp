// What a pty holds, taken out and put back (pty_queue.hpp).
#include "tty/pty_queue.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace ckpt::tty {

namespace {

constexpr uint8_t kVStart = 021, kVStop = 023;  // ^Q, ^S: the flow a packet reader is told of

bool canonical(const termios& t) {
  return (t.c_lflag & ICANON) && !(t.c_lflag & EXTPROC);
}

// Whether byte `b` ends a line in canonical mode under `t` (VEOF aside).
bool ends_line(uint8_t b, const termios& t) {
  if (b == '\n') return true;
  if (t.c_cc[VEOL] && b == t.c_cc[VEOL]) return true;
  return (t.c_lflag & IEXTEN) && t.c_cc[VEOL2] && b == t.c_cc[VEOL2];
}

bool flow(const termios& t) {
  return (t.c_iflag & IXON) && t.c_cc[VSTOP] == kVStop && t.c_cc[VSTART] == kVStart;
}

std::string hex(uint8_t b) {
  char s[8];
  std::snprintf(s, sizeof s, "0x%02x", b);
  return s;
}

bool readable(int fd, short ev = POLLIN) {
  pollfd p{fd, ev, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & ev);
}

// Reads what `fd` has (non-blocking copies: never waits for more).
Status drain(int fd, std::string* out, const std::string& what) {
  char buf[8192];
  while (readable(fd)) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return sys_error(what);
    if (n == 0) break;
    out->append(buf, size_t(n));
  }
  return {};
}

// Non-canonical input: poll would wait for VMIN bytes, so read until the
// line discipline has none. A read that finds none first waits for what the
// master wrote and the line discipline has not taken in yet.
Status read_raw(int slave, std::string* out, const std::string& what) {
  char buf[8192];
  for (;;) {
    ssize_t r = ::read(slave, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return {};
    if (r < 0) return sys_error(what + ": reading its unread input");
    if (r == 0) return {};
    out->append(buf, size_t(r));
  }
}

// Writes everything, waiting (2 s at most) while the other side's buffer
// is being emptied into its line discipline.
Status write_waiting(int fd, const std::string& data, const std::string& what) {
  size_t done = 0;
  int waits = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if ((n == 0 || errno == EAGAIN) && waits++ < 200) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 10);
      continue;
    }
    return make_error(n < 0 ? errno : EIO, what + ": " + std::to_string(data.size() - done) +
                                               " bytes of output could not be put back");
  }
  return {};
}

Status set(int slave, const termios& t, const std::string& what) {
  if (::tcsetattr(slave, TCSANOW, &t) != 0) return sys_error(what + ": setting terminal settings");
  return {};
}

// A VEOF for lines that ended with one: a byte no saved input holds and that
// means nothing else under the injection settings.
int eof_byte(const termios& t, const Queues& q) {
  bool used[256] = {};
  used[0] = used['\n'] = used[0xff] = true;
  used[t.c_cc[VEOL]] = used[t.c_cc[VEOL2]] = true;
  used[kVStart] = used[kVStop] = used[t.c_cc[VSTART]] = used[t.c_cc[VSTOP]] = true;
  for (const InputSegment& s : q.input)
    for (unsigned char b : s.bytes) used[b] = true;
  if (!used[t.c_cc[VEOF]]) return t.c_cc[VEOF];
  for (int b = 1; b < 255; ++b)
    if (!used[b]) return b;
  return -1;
}

// The settings input is put back under: every byte stored as it is, lines
// ended where they were (canonical), nothing echoed; the flow settings kept,
// so that a packet reader is told of no change.
termios injection_settings(const termios& t, int eof) {
  termios inj = t;
  inj.c_iflag = t.c_iflag & IXON;
  inj.c_oflag = 0;
  if (canonical(t)) {
    inj.c_lflag = ICANON | IEXTEN;
    for (int c : {VERASE, VKILL, VWERASE, VLNEXT, VREPRINT}) inj.c_cc[c] = 0;
    inj.c_cc[VEOF] = cc_t(eof < 0 ? 0 : eof);
  } else {
    inj.c_lflag = t.c_lflag & EXTPROC;
  }
  return inj;
}

Status inject(int slave, const std::string& bytes, const std::string& what) {
  for (char c : bytes)
    if (::ioctl(slave, TIOCSTI, &c) != 0)
      return sys_error(what + ": putting back its input (TIOCSTI)");
  return {};
}

}  // namespace

bool can_inject_input() {
  static const bool yes = [] {
    UniqueFd m(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!m.valid()) return false;
    int unlock = 0;
    ::ioctl(m.get(), TIOCSPTLCK, &unlock);
    UniqueFd s(::ioctl(m.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
    char c = 'x';
    return s.valid() && ::ioctl(s.get(), TIOCSTI, &c) == 0;
  }();
  return yes;
}

Status check_takeable(int master, int slave, const std::string& what) {
  if (!readable(slave, POLLOUT)) {
    // No room to write: output stopped by flow control, or the master's
    // buffers full. Full ones are taken; with room left, it is stopped.
    (void)readable(master);  // lets the line discipline take what is in flight
    ::usleep(20000);
    int queued = 0;
    ::ioctl(master, FIONREAD, &queued);
    if (!readable(slave, POLLOUT) && queued < 2048)
      return make_error(
          ENOTSUP, what + ": output stopped by flow control (^S or tcflow): not supported yet");
  }
  int unread = 0;
  if (::ioctl(slave, FIONREAD, &unread) != 0)
    return sys_error(what + ": measuring its unread input");
  if (unread > 0 && !can_inject_input())
    return make_error(EPERM, what + ": " + std::to_string(unread) +
                                 " bytes of input not yet read by the slave side: putting them "
                                 "back needs CAP_SYS_ADMIN (TIOCSTI)");
  return {};
}

Status take(int master, int slave, const termios& t, bool whole_lines, Queues* q,
            const std::string& what) {
  int packet = 0;
  q->packet = ::ioctl(master, TIOCGPKT, &packet) == 0 && packet;
  if (q->packet) {
    // A status byte pending is what the next read returns, alone.
    if (readable(master, POLLPRI)) {
      uint8_t c = 0;
      if (::read(master, &c, 1) == 1) q->status = c;
    }
    int off = 0;
    if (::ioctl(master, TIOCPKT, &off) != 0) return sys_error(what + ": leaving packet mode");
  }
  CKPT_TRY(drain(master, &q->output, what + ": reading its unread output"));
  if (!canonical(t)) {
    std::string raw;
    CKPT_TRY(read_raw(slave, &raw, what));
    if (!raw.empty()) q->input.push_back({Segment::kRaw, std::move(raw)});
    return {};
  }
  // Canonical: one read per complete line (at most a full buffer of them).
  char buf[8192];
  for (int lines = 0; lines < 4096 && readable(slave); ++lines) {
    ssize_t n = ::read(slave, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return sys_error(what + ": reading its unread input");
    const bool ended = n > 0 && ends_line(uint8_t(buf[n - 1]), t);
    q->input.push_back({ended ? Segment::kLine : Segment::kEofLine, std::string(buf, size_t(n))});
  }
  if (!whole_lines) return {};
  // The line being typed is readable only without ICANON.
  termios nc = t;
  nc.c_lflag &= ~tcflag_t(ICANON);
  nc.c_cc[VMIN] = 0;
  nc.c_cc[VTIME] = 0;
  CKPT_TRY(set(slave, nc, what));
  std::string partial;
  Status s = drain(slave, &partial, what + ": reading the line being typed");
  CKPT_TRY(set(slave, t, what));
  CKPT_TRY(s);
  if (!partial.empty()) q->input.push_back({Segment::kPartial, std::move(partial)});
  return {};
}

Status check_puttable(const termios& t, const Queues& q, const std::string& what) {
  if (!q.input.empty() && !can_inject_input())
    return make_error(EPERM,
                      what + ": putting back its unread input needs CAP_SYS_ADMIN (TIOCSTI)");
  const bool canon = canonical(t);
  for (const InputSegment& s : q.input) {
    if ((s.kind == Segment::kRaw) == canon)
      return make_error(EBADMSG, what + ": its input does not match its terminal mode");
    if (s.kind == Segment::kLine && (s.bytes.empty() || !ends_line(uint8_t(s.bytes.back()), t)))
      return make_error(EBADMSG, what + ": a line of its input has no line end");
    const size_t inner = s.bytes.size() - (s.kind == Segment::kLine ? 1 : 0);
    for (size_t i = 0; i < inner; ++i) {
      const uint8_t b = uint8_t(s.bytes[i]);
      if ((t.c_iflag & IXON) && b && (b == t.c_cc[VSTART] || b == t.c_cc[VSTOP]))
        return make_error(ENOTSUP, what + ": its unread input holds " + hex(b) +
                                       ", now a flow-control character (IXON): cannot be put back");
      if (canon && ends_line(b, t))
        return make_error(ENOTSUP, what + ": a line of its unread input holds " + hex(b) +
                                       ", which now ends a line: cannot be put back");
    }
    if (s.kind == Segment::kEofLine && eof_byte(t, q) < 0)
      return make_error(ENOTSUP, what +
                                     ": its unread input uses every byte value: no end of file "
                                     "character is left to end a line with");
  }
  if (!q.packet) return {};
  const uint8_t st = q.status;
  if (st & TIOCPKT_STOP)
    return make_error(ENOTSUP, what + ": packet status says output stopped: not supported yet");
  if (((st & TIOCPKT_DOSTOP) && !flow(t)) || ((st & TIOCPKT_NOSTOP) && flow(t)))
    return make_error(ENOTSUP,
                      what + ": packet status " + hex(st) + " does not match its flow settings");
  // With EXTPROC every settings change is reported (TIOCPKT_IOCTL).
  const bool changes = !q.input.empty() || (!q.output.empty() && (t.c_oflag & OPOST)) ||
                       (st & (TIOCPKT_DOSTOP | TIOCPKT_NOSTOP));
  if ((t.c_lflag & EXTPROC) && !(st & TIOCPKT_IOCTL) && changes)
    return make_error(ENOTSUP, what + ": packet mode with EXTPROC and unread data: not supported");
  return {};
}

Status put(int master, int slave, const termios& t, const Queues& q, const std::string& what) {
  const uint8_t st = q.status;
  if (q.packet) {
    int on = 1;  // turning it on clears the status
    if (::ioctl(master, TIOCPKT, &on) != 0) return sys_error(what + ": setting packet mode");
    // Flushes set their bits; the queues are empty yet.
    if ((st & TIOCPKT_FLUSHREAD) && ::tcflush(slave, TCIFLUSH) != 0)
      return sys_error(what + ": flushing its input");
    if ((st & TIOCPKT_FLUSHWRITE) && ::tcflush(slave, TCOFLUSH) != 0)
      return sys_error(what + ": flushing its output");
    if (st & TIOCPKT_IOCTL) {  // any change with EXTPROC before or after it
      termios e = t;
      e.c_lflag |= EXTPROC;
      CKPT_TRY(set(slave, e, what));
      CKPT_TRY(set(slave, t, what));
    }
    if (st & (TIOCPKT_DOSTOP | TIOCPKT_NOSTOP)) {  // a flow change to the current one
      termios f = t;
      if (flow(t)) {
        f.c_iflag &= ~tcflag_t(IXON);
      } else {
        f.c_iflag |= IXON;
        f.c_cc[VSTART] = kVStart;
        f.c_cc[VSTOP] = kVStop;
      }
      CKPT_TRY(set(slave, f, what));
      CKPT_TRY(set(slave, t, what));
    }
  }
  if (!q.input.empty()) {
    const int eof = canonical(t) ? eof_byte(t, q) : -1;
    CKPT_TRY(set(slave, injection_settings(t, eof), what));
    Status s;
    for (const InputSegment& seg : q.input) {
      if (s.ok()) s = inject(slave, seg.bytes, what);
      if (s.ok() && seg.kind == Segment::kEofLine)
        s = inject(slave, std::string(1, char(eof)), what);
    }
    CKPT_TRY(set(slave, t, what));
    CKPT_TRY(s);
  }
  if (!q.output.empty()) {
    // Through the slave with output processing off: it reaches the master
    // byte for byte.
    const bool opost = t.c_oflag & OPOST;
    if (opost) {
      termios raw = t;
      raw.c_oflag &= ~tcflag_t(OPOST);
      CKPT_TRY(set(slave, raw, what));
    }
    Status s = write_waiting(slave, q.output, what);
    if (opost) CKPT_TRY(set(slave, t, what));
    CKPT_TRY(s);
  }
  if (q.packet && (st & TIOCPKT_START)) {  // a stop, then the start the reader has not seen
    if (::tcflow(slave, TCOOFF) != 0 || ::tcflow(slave, TCOON) != 0)
      return sys_error(what + ": making its flow status again");
  }
  return {};
}

}  // namespace ckpt::tty
