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
#include "tty/pty_queue.hpp"
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
  int locked = 0;
  if (::ioctl(master, TIOCGPTLCK, &locked) == 0) f->params[image::kPtyLocked] = locked ? 1 : 0;
  // The session and group of the slave side, asked through the master
  // (which is nobody's controlling terminal): none gives ENOTTY.
  pid_t sid = 0, fg = 0;
  if (::ioctl(master, TIOCGSID, &sid) == 0 && sid > 0) {
    f->params[image::kPtySession] = uint64_t(sid);
    if (::ioctl(master, TIOCGPGRP, &fg) == 0 && fg > 0)
      f->params[image::kPtyForeground] = uint64_t(fg);
  }
  // The slave side through the master (TIOCGPTPEER): no path lookup, and the
  // same pty even where /dev/pts is another mount.
  UniqueFd slave(::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!slave.valid()) return sys_error(what + ": opening its slave side");
  CKPT_TRY(save_settings(slave.get(), what, f));
  termios t{};
  ::tcgetattr(slave.get(), &t);
  CKPT_TRY(check_takeable(master, slave.get(), what));
  // Taken out and put back at once, refused or not: the program keeps it.
  Queues q;
  Status s = take(master, slave.get(), t, can_inject_input(), &q, what);
  Status ok = s.ok() ? check_puttable(t, q, what) : s;
  Status back = put(master, slave.get(), t, q, what);
  CKPT_TRY(back);
  CKPT_TRY(ok);
  store_queues(q, f);
  return {};
}

Status collect_slave(int slave, int index, const std::string& what, image::FileRecord* f) {
  f->kind = image::FileKind::kPtySlave;
  f->params.assign(image::kPtyParamsV1, 0);
  f->params[image::kPtyIndex] = uint64_t(index);
  return save_settings(slave, what, f);
}

void store_queues(const Queues& q, image::FileRecord* f) {
  f->params.resize(image::kPtyParams);
  f->params[image::kPtyPacket] = q.packet ? 1 : 0;
  f->params[image::kPtyPacketStatus] = q.status;
  f->params[image::kPtyOutputLen] = q.output.size();
  f->data.assign(q.output.begin(), q.output.end());
  for (const InputSegment& s : q.input) {
    f->params.push_back(uint64_t(s.bytes.size()) | uint64_t(s.kind) << 32);
    f->data.insert(f->data.end(), s.bytes.begin(), s.bytes.end());
  }
  if (q.packet || !q.input.empty()) f->kind = image::FileKind::kPtyMasterQueued;
}

Result<Queues> load_queues(const image::FileRecord& f, const std::string& what) {
  Queues q;
  const auto* bytes = reinterpret_cast<const char*>(f.data.data());
  if (f.params.size() < image::kPtyParams) {  // written before packet mode and input were saved
    q.output.assign(bytes, f.data.size());
    return q;
  }
  auto bad = [&] { return make_error(EBADMSG, what + ": pty record is malformed"); };
  q.packet = f.params[image::kPtyPacket] != 0;
  q.status = uint8_t(f.params[image::kPtyPacketStatus]);
  size_t at = f.params[image::kPtyOutputLen];
  if (at > f.data.size()) return bad();
  q.output.assign(bytes, at);
  for (size_t i = image::kPtyParams; i < f.params.size(); ++i) {
    const uint64_t len = f.params[i] & 0xffffffffu, kind = f.params[i] >> 32;
    if (kind > uint64_t(Segment::kPartial) || len > f.data.size() - at) return bad();
    q.input.push_back({Segment(kind), std::string(bytes + at, len)});
    at += len;
  }
  if (at != f.data.size()) return bad();
  return q;
}

}  // namespace ckpt::tty
