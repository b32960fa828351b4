// Names and the readable summary of a drawn job (`jobgen describe SEED`).
#include <sstream>

#include "spec.hpp"

namespace jobgen {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kPipe:
      return "pipes";
    case Kind::kFifo:
      return "FIFOs";
    case Kind::kUnixStream:
      return "unix-stream pair";
    case Kind::kUnixDgram:
      return "unix-dgram pair";
    case Kind::kUnixSeqpacket:
      return "unix-seqpacket pair";
    case Kind::kUnixNamed:
      return "unix named listener";
    case Kind::kUnixAbstract:
      return "unix abstract listener";
    case Kind::kTcp4:
      return "tcp 127.0.0.1";
    case Kind::kTcp6:
      return "tcp ::1";
    case Kind::kUdp:
      return "udp 127.0.0.1";
    case Kind::kEventfd:
      return "eventfds";
    case Kind::kPty:
      return "pty";
  }
  return "?";
}

bool is_datagram(Kind k) {
  return k == Kind::kUnixDgram || k == Kind::kUnixSeqpacket || k == Kind::kUdp ||
         k == Kind::kEventfd;
}

bool is_inherited(Kind k) {
  return k == Kind::kPipe || k == Kind::kUnixStream || k == Kind::kUnixDgram ||
         k == Kind::kUnixSeqpacket || k == Kind::kEventfd || k == Kind::kPty;
}

bool has_listener(Kind k) {
  return k == Kind::kUnixNamed || k == Kind::kUnixAbstract || k == Kind::kTcp4 || k == Kind::kTcp6;
}

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::kBand:
      return "band";
    case Pattern::kSparse:
      return "sparse";
    case Pattern::kStream:
      return "stream";
    case Pattern::kSweep:
      return "sweep";
    case Pattern::kPhase:
      return "phase";
    case Pattern::kQuiet:
      return "quiet";
  }
  return "?";
}

const char* backing_name(Backing b) {
  switch (b) {
    case Backing::kPrivate:
      return "private";
    case Backing::kSharedAnon:
      return "shared-anon";
    case Backing::kMemfd:
      return "memfd";
    case Backing::kSysv:
      return "sysv";
    case Backing::kShmFile:
      return "/dev/shm";
  }
  return "?";
}

namespace {

std::string side(const Side& s) {
  std::ostringstream o;
  o << "fd " << s.rd;
  if (s.wr != s.rd) o << "/" << s.wr;
  if (s.dup >= 0) o << " dup " << s.dup;
  if (s.cloexec) o << " cloexec";
  if (s.nonblock) o << " nonblock";
  return o.str();
}

}  // namespace

std::string describe(const Job& job) {
  std::ostringstream o;
  o << "seed " << job.seed << ": " << job.members.size() << " processes, " << job.steps
    << " steps\n";
  for (const Member& m : job.members) {
    o << "  m" << m.index;
    if (m.parent >= 0) o << " (child of m" << m.parent << ")";
    if (m.new_session) o << " setsid";
    if (m.new_pgrp) o << " setpgid";
    if (m.join_pgrp_of >= 0) o << " joins group of m" << m.join_pgrp_of;
    if (m.zombie_exit >= 0) o << " zombie(" << m.zombie_exit << ")";
    if (m.thread) o << " thread";
    if (m.epoll_fd >= 0) o << " epoll@" << m.epoll_fd;
    if (m.timerfd >= 0) o << " timerfd@" << m.timerfd;
    if (m.signalfd >= 0) o << " signalfd@" << m.signalfd;
    if (m.rt_signal_step >= 0) o << " signals parent at step " << m.rt_signal_step;
    if (m.pace_us) o << " pace " << m.pace_us << "us";
    if (m.tick_us) o << " ticks every " << m.tick_us << "us";
    if (m.refusal == Refusal::kInFlight) o << " REFUSAL fd in flight at step " << m.refusal_step;
    if (m.refusal == Refusal::kOutsidePeer) o << " REFUSAL peer outside the job";
    o << "\n";
  }
  for (const Channel& c : job.channels) {
    o << "  c" << c.id << " " << kind_name(c.kind) << (c.seqpacket ? " seqpacket" : "")
      << (c.kind == Kind::kUdp ? (c.udp_connected ? " connected" : " sendto") : "") << ": m" << c.a
      << " [" << side(c.sa) << "] <-> m" << c.b << " [" << side(c.sb) << "], " << c.msg << " B";
    if (c.service >= 0) {
      const Service& s = job.services[c.service];
      o << ", listener s" << s.id << "@" << s.fd << (s.keep ? "" : " closed")
        << (s.reuse ? " reuse" : "");
    }
    if (is_inherited(c.kind)) o << ", made by m" << c.creator;
    o << "\n";
  }
  for (const Region& g : job.regions) {
    o << "  r" << g.id << " " << backing_name(g.backing) << " " << g.slice_pages << " pages"
      << (g.users.size() > 1 ? " per user" : "") << ", by m" << g.creator
      << (g.by_thread ? "'s thread" : "") << ":";
    for (size_t u = 0; u < g.users.size(); ++u)
      o << " m" << g.users[u] << "=" << pattern_name(g.patterns[u]);
    if (g.fd >= 0) o << ", fd " << g.fd;
    o << "\n";
  }
  for (const SharedFile& f : job.files)
    o << "  f" << f.id << " file opened by m" << f.creator << " at fd " << f.fd << ", written by m"
      << f.writer << ", " << f.record << " B per step\n";
  const Plan& p = job.plan;
  o << "  plan: full after " << p.full_delay_ms << " ms" << (p.full_live ? " live" : "");
  for (size_t i = 0; i < p.incr_delay_ms.size(); ++i)
    o << ", incr after " << p.incr_delay_ms[i] << " ms" << (p.incr_live[i] ? " live" : "");
  o << (p.compress ? ", compressed" : "") << ", kill after " << p.kill_delay_ms << " ms"
    << (p.kill_by_tool ? " (by the last checkpoint)" : "");
  if (p.restore_generation >= 0) o << ", restore generation " << p.restore_generation;
  o << "\n";
  return o.str();
}

}  // namespace jobgen
