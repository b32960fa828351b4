#include "sockets/tcp_settle.hpp"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "proc/fd_links.hpp"
#include "sockets/address.hpp"
#include "sockets/tcp.hpp"
#include "util/clock.hpp"

namespace ckpt::sockets {

namespace {

// One end of a job-internal connection: this tool's copy of it.
struct End {
  UniqueFd sock;
  Endpoint local, peer;
  bool reuse = false;  // SO_REUSEADDR, which leaving repair mode clears
};

// Where the end's sequence numbers stand: what it has sent (write_seq less
// the bytes not yet sent) and what it has received (rcv_nxt).
struct Seqs {
  uint32_t sent = 0, received = 0;
  int unsent = 0;            // queued, not yet sent: the kernel may send it any time
  bool window_shut = false;  // it told its peer to send nothing (rcv_wnd 0)
};

Result<Seqs> read_seqs(const End& e, const std::string& what) {
  const int s = e.sock.get();
  int on = 1, off = kRepairOffNoProbe, send_q = TCP_SEND_QUEUE, recv_q = TCP_RECV_QUEUE;
  if (::setsockopt(s, IPPROTO_TCP, TCP_REPAIR, &on, sizeof on) != 0)
    return sys_error(what + ": entering repair mode");
  Seqs q;
  uint32_t write_seq = 0;
  int unsent = 0;
  socklen_t len = sizeof write_seq;
  Status st;
  if (::setsockopt(s, IPPROTO_TCP, TCP_REPAIR_QUEUE, &send_q, sizeof send_q) != 0 ||
      ::getsockopt(s, IPPROTO_TCP, TCP_QUEUE_SEQ, &write_seq, &len) != 0 ||
      ::ioctl(s, SIOCOUTQNSD, &unsent) != 0 ||
      ::setsockopt(s, IPPROTO_TCP, TCP_REPAIR_QUEUE, &recv_q, sizeof recv_q) != 0 ||
      (len = sizeof q.received, ::getsockopt(s, IPPROTO_TCP, TCP_QUEUE_SEQ, &q.received, &len)) !=
          0)
    st = sys_error(what + ": reading its sequence numbers");
  q.sent = write_seq - uint32_t(unsent);
  q.unsent = unsent;
  tcp_repair_window w{};
  len = sizeof w;
  if (st.ok() && ::getsockopt(s, IPPROTO_TCP, TCP_REPAIR_WINDOW, &w, &len) != 0)
    st = sys_error(what + ": reading its window");
  q.window_shut = w.rcv_wnd == 0;
  if (::setsockopt(s, IPPROTO_TCP, TCP_REPAIR, &off, sizeof off) != 0 && st.ok())
    st = sys_error(what + ": leaving repair mode");
  if (e.reuse && ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 && st.ok())
    st = sys_error(what + ": setting SO_REUSEADDR again");
  if (!st.ok()) return st.error();
  return q;
}

// The established TCP sockets of the job, by inode (a socket shared by
// several descriptors or members is one end).
Result<std::map<uint64_t, End>> job_ends(const std::vector<pid_t>& job) {
  std::map<uint64_t, End> ends;
  if (job.empty()) return ends;
  std::map<uint64_t, const TcpRow*> established;
  const std::vector<TcpRow> rows = tcp_rows("/proc/" + std::to_string(job[0]) + "/net/");
  for (const TcpRow& r : rows)
    if (r.state == TCP_ESTABLISHED && r.inode) established[r.inode] = &r;
  for (pid_t pid : job)
    for (const proc::FdLink& l : proc::fd_links(pid)) {
      unsigned long long ino = 0;
      if (std::sscanf(l.target.c_str(), "socket:[%llu]", &ino) != 1) continue;
      auto row = established.find(ino);
      if (row == established.end() || ends.count(ino)) continue;
      auto copy = proc::take_fd(pid, l.fd);
      if (!copy.ok()) continue;  // closed meanwhile: a frozen job cannot have
      End e;
      e.sock = std::move(*copy);
      e.local = row->second->local;
      e.peer = row->second->remote;
      int reuse = 0;
      socklen_t len = sizeof reuse;
      ::getsockopt(e.sock.get(), SOL_SOCKET, SO_REUSEADDR, &reuse, &len);
      e.reuse = reuse != 0;
      ends.emplace(ino, std::move(e));
    }
  return ends;
}

}  // namespace

Status settle_job_tcp(const std::vector<pid_t>& job, double max_seconds) {
  CKPT_ASSIGN(auto ends, job_ends(job));
  // The connections both of whose ends are the job's.
  std::vector<std::pair<const End*, const End*>> pairs;
  for (const auto& [ino, a] : ends)
    for (const auto& [ino2, b] : ends)
      if (ino < ino2 && a.local == b.peer && a.peer == b.local) pairs.push_back({&a, &b});
  if (pairs.empty()) return {};
  const double deadline = now_seconds() + max_seconds;
  for (;;) {
    std::string moving;
    for (const auto& [a, b] : pairs) {
      const std::string what = "TCP connection " + describe(a->local) + " -> " + describe(a->peer);
      CKPT_ASSIGN(Seqs qa, read_seqs(*a, what));
      CKPT_ASSIGN(Seqs qb, read_seqs(*b, what));
      // Settled: what either end sent has arrived, and it has nothing more
      // to send that the kernel could still put on the wire (data held
      // back by pacing, Nagle or a cork goes out without the program),
      // unless its peer's window is shut.
      const bool a_done = qa.sent == qb.received && (qa.unsent == 0 || qb.window_shut);
      const bool b_done = qb.sent == qa.received && (qb.unsent == 0 || qa.window_shut);
      if (!a_done || !b_done) {
        moving = what;
        break;
      }
    }
    if (moving.empty()) return {};
    if (now_seconds() > deadline)
      return make_error(EAGAIN, moving + ": data still on its way between the job's members " +
                                    std::to_string(max_seconds) + " s after the freeze");
    ::usleep(1000);
  }
}

}  // namespace ckpt::sockets
