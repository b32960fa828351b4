// Saving a pty pair's ends (pty.hpp).
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "proc/fd_links.hpp"
#include "tty/pty.hpp"
#include "tty/termios_words.hpp"
#include "util/text.hpp"

namespace ckpt::tty {

std::set<int> job_pty_masters(const std::vector<pid_t>& job) {
  std::set<int> out;
  for (pid_t pid : job)
    for (const proc::FdLink& l : proc::fd_links(pid)) {
      if (l.target != "/dev/ptmx") continue;
      auto info = read_file(proc_path(pid, "fdinfo/" + std::to_string(l.fd)));
      size_t at = info.ok() ? info->find("tty-index:") : std::string::npos;
      if (at != std::string::npos) out.insert(std::atoi(info->c_str() + at + 10));
    }
  return out;
}

int pts_index(const std::string& path) {
  const char* p = "/dev/pts/";
  if (path.compare(0, 9, p) != 0 || path.size() == 9) return -1;
  char* end;
  long n = std::strtol(path.c_str() + 9, &end, 10);
  return *end == 0 && n >= 0 ? int(n) : -1;
}

namespace {

Status save_settings(int slave, const std::string& what, image::FileRecord* f) {
  termios t{};
  if (::tcgetattr(slave, &t) != 0) return sys_error(what + ": reading its terminal settings");
  winsize w{};
  if (::ioctl(slave, TIOCGWINSZ, &w) != 0) return sys_error(what + ": reading its window size");
  store_termios(t, w, &f->params);
  return {};
}

}  // namespace

Status collect_master(int master, const std::string& info, const std::string& what,
                      image::FileRecord* f) {
  f->kind = image::FileKind::kPtyMaster;
  f->params.assign(image::kPtyParams, 0);
  size_t at = info.find("tty-index:");
  if (at == std::string::npos) return make_error(EPROTO, what + ": no tty-index in fdinfo");
  f->params[image::kPtyIndex] = uint64_t(std::atoi(info.c_str() + at + 10));
  int packet = 0, locked = 0;
  if (::ioctl(master, TIOCGPKT, &packet) == 0 && packet)
    return make_error(ENOTSUP, what + ": pty in packet mode: not supported yet");
  if (::ioctl(master, TIOCGPTLCK, &locked) == 0) f->params[image::kPtyLocked] = locked ? 1 : 0;
  // The slave side through the master (TIOCGPTPEER): no path lookup, and the
  // same pty even where /dev/pts is another mount.
  UniqueFd slave(::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!slave.valid()) return sys_error(what + ": opening its slave side");
  CKPT_TRY(save_settings(slave.get(), what, f));
  int to_slave = 0, to_master = 0;
  if (::ioctl(slave.get(), FIONREAD, &to_slave) != 0 || ::ioctl(master, FIONREAD, &to_master) != 0)
    return sys_error(what + ": measuring its unread data");
  if (to_slave > 0)
    return make_error(ENOTSUP, what + ": " + std::to_string(to_slave) +
                                   " bytes of input not yet read by the slave side: not "
                                   "supported yet");
  if (to_master <= 0) return {};
  // Read the output waiting for the master, then put it back: written to the
  // slave with output processing off, it reaches the master byte for byte.
  f->data.resize(size_t(to_master));
  size_t got = 0;
  while (got < f->data.size()) {
    // The copy shares the program's file status flags: poll, so that a
    // blocking master never blocks the tool.
    pollfd pfd{master, POLLIN, 0};
    if (::poll(&pfd, 1, 0) != 1) break;
    ssize_t n = ::read(master, f->data.data() + got, f->data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += size_t(n);
  }
  f->data.resize(got);
  termios t{}, raw{};
  ::tcgetattr(slave.get(), &t);
  raw = t;
  raw.c_oflag &= ~tcflag_t(OPOST);
  Status s;
  if (::tcsetattr(slave.get(), TCSANOW, &raw) != 0)
    s = sys_error(what + ": pausing output processing");
  if (s.ok())
    s = write_all(slave.get(), f->data.data(), f->data.size(),
                  what + ": putting back its unread output");
  ::tcsetattr(slave.get(), TCSANOW, &t);
  return s;
}

Status collect_slave(int slave, int index, const std::string& what, image::FileRecord* f) {
  f->kind = image::FileKind::kPtySlave;
  f->params.assign(image::kPtyParams, 0);
  f->params[image::kPtyIndex] = uint64_t(index);
  return save_settings(slave, what, f);
}

}  // namespace ckpt::tty
