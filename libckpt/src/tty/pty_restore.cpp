// Recreating a pty pair (pty.hpp).
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>

#include <vector>

#include "tty/pty.hpp"
#include "tty/pty_queue.hpp"
#include "tty/termios_words.hpp"

namespace ckpt::tty {

namespace {

// A new pty master, at index `want` where it is free, so the restored
// terminal keeps its name (/dev/pts/N: what `tty` printed, what a program
// stored). The kernel hands out the lowest free index: the free ones below
// `want` are held open until it comes, then let go. Where `want` is taken,
// the next free index is used.
Result<UniqueFd> open_master(uint64_t want, const std::string& what) {
  constexpr int kMaxHeld = 4096;  // devpts' default limit of ptys
  std::vector<UniqueFd> held;
  for (;;) {
    UniqueFd master(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!master.valid()) return sys_error(what + ": creating a pty (/dev/ptmx)");
    unsigned index = 0;
    if (::ioctl(master.get(), TIOCGPTN, &index) != 0 || index >= want || held.size() >= kMaxHeld)
      return master;
    held.push_back(std::move(master));
  }
}

Result<int> pair_of(const image::FileRecord& f, const std::string& what, Pairs* pairs) {
  const uint64_t index = f.params[image::kPtyIndex];
  auto it = pairs->masters.find(index);
  if (it != pairs->masters.end()) return it->second.get();
  CKPT_ASSIGN(UniqueFd master, open_master(index, what));
  int unlock = 0;
  if (::ioctl(master.get(), TIOCSPTLCK, &unlock) != 0)
    return sys_error(what + ": unlocking the pty");
  UniqueFd slave(::ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave.valid()) return sys_error(what + ": opening the new pty's slave side");
  termios t;
  winsize w;
  load_termios(f.params, &t, &w);
  if (::tcsetattr(slave.get(), TCSANOW, &t) != 0 || ::ioctl(slave.get(), TIOCSWINSZ, &w) != 0)
    return sys_error(what + ": setting the terminal's settings");
  return pairs->masters.emplace(index, std::move(master)).first->second.get();
}

// What the pty held (packet mode, its status, output and input not read).
Status refill(int master, const image::FileRecord& f, const std::string& what) {
  CKPT_ASSIGN(Queues q, load_queues(f, what));
  if (!q.packet && q.output.empty() && q.input.empty()) return {};
  UniqueFd slave(::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!slave.valid()) return sys_error(what + ": opening the new pty's slave side");
  termios t;
  winsize w;
  load_termios(f.params, &t, &w);
  // The kernel keeps a pty's c_cflag at CS8 | CREAD: compare what it holds.
  if (::tcgetattr(slave.get(), &t) != 0) return sys_error(what + ": reading terminal settings");
  CKPT_TRY(check_puttable(t, q, what));
  return put(master, slave.get(), t, q, what);
}

}  // namespace

Result<UniqueFd> restore_pty(const image::FileRecord& f, const std::string& what, Pairs* pairs) {
  if (f.params.size() < image::kPtyParamsV1)
    return make_error(EBADMSG, what + ": pty record is malformed");
  CKPT_ASSIGN(int master, pair_of(f, what, pairs));
  const int nonblock = (f.flags & O_NONBLOCK) ? O_NONBLOCK : 0;
  if (f.kind == image::FileKind::kPtySlave) {
    UniqueFd slave(
        ::ioctl(master, TIOCGPTPEER, int(f.flags & O_ACCMODE) | nonblock | O_NOCTTY | O_CLOEXEC));
    if (!slave.valid()) return sys_error(what + ": opening the new pty's slave side");
    return slave;
  }
  // The master: one open file description per pty, shared by dups.
  const uint64_t index = f.params[image::kPtyIndex];
  if (pairs->refilled.insert(index).second) CKPT_TRY(refill(master, f, what));
  if (f.params[image::kPtyLocked]) {
    int lock = 1;
    if (::ioctl(master, TIOCSPTLCK, &lock) != 0) return sys_error(what + ": locking the pty");
  }
  UniqueFd copy(::fcntl(master, F_DUPFD_CLOEXEC, 0));
  if (!copy.valid()) return sys_error(what + ": duplicating the pty master");
  if (nonblock && ::fcntl(copy.get(), F_SETFL, O_NONBLOCK) != 0)
    return sys_error(what + ": setting O_NONBLOCK");
  return copy;
}

}  // namespace ckpt::tty
