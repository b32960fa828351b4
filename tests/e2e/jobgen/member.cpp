#include "member.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "channel.hpp"
#include "fdtable.hpp"
#include "memory.hpp"
#include "rng.hpp"
#include "sys.hpp"

namespace jobgen {

namespace {

const Job& job() {
  return *self.job;
}
const Member& me() {
  return job().members[self.index];
}

constexpr int kTimerValueS = 500, kTimerIntervalS = 1000;

// State every process inherits from its parent at fork (plain memory).
std::vector<uint8_t*> region_base;  // by region id: where its creator mapped it
std::vector<pid_t> member_pid;      // by member index, as far as this process knows

volatile sig_atomic_t rt_sum = 0;
void on_rt(int, siginfo_t* si, void*) {
  rt_sum = rt_sum + si->si_value.sival_int;
}

volatile sig_atomic_t ticks = 0;
void on_tick(int) {
  ticks = ticks + 1;
}

int rt_notify() {
  return SIGRTMIN + 1;
}
int rt_queued() {
  return SIGRTMIN + 2;
}

// Descriptors of channel sides held by someone in `root`'s subtree.
bool side_in_subtree(const Channel& c, int side, int root) {
  return in_subtree(job(), root, side == 0 ? c.a : c.b);
}

void close_side(const Channel& c, int side) {
  int f[3];
  side_fds(c, side, f);
  for (int fd : f)
    if (fd >= 0) ::close(fd);
}

bool region_needed_below(const Region& g, int root) {
  if (in_subtree(job(), root, g.creator) && g.creator == root) return true;
  for (int u : g.users)
    if (in_subtree(job(), root, u)) return true;
  return false;
}

// Right after fork: drop what this subtree has no use for.
void become(int index) {
  self.index = index;
  for (const Channel& c : job().channels) {
    if (!is_inherited(c.kind) || !in_subtree(job(), c.creator, index) || c.creator == index)
      continue;
    for (int side = 0; side < 2; ++side)
      if (!side_in_subtree(c, side, index)) close_side(c, side);
  }
  for (const Region& g : job().regions) {
    if (!region_base[g.id]) continue;
    if (g.fd >= 0 && g.backing != Backing::kSysv) ::close(g.fd);
    if (!region_needed_below(g, index)) {
      unmap_region(g, region_base[g.id]);
      region_base[g.id] = nullptr;
    }
  }
  for (const SharedFile& f : job().files)
    if (f.creator != index && in_subtree(job(), f.creator, index) &&
        !in_subtree(job(), index, f.writer))
      ::close(f.fd);
  ::close(job().ctl_up[0]);
  ::close(job().ctl_go[1]);
  ::close(job().ctl_fin[1]);
  const Member& m = me();
  if (m.new_session && ::setsid() < 0) die_errno("setsid");
  if (m.new_pgrp && ::setpgid(0, 0) != 0) die_errno("setpgid");
  if (m.join_pgrp_of >= 0 && ::setpgid(0, member_pid[m.join_pgrp_of]) != 0 && errno != EACCES)
    die_errno("joining the process group of m" + std::to_string(m.join_pgrp_of));
}

// Whether the process group (or the session) of member i is led by a member.
bool led_in_job(int i, bool session) {
  for (;;) {
    const Member& m = job().members[i];
    if (m.new_session || (!session && (m.new_pgrp || m.join_pgrp_of >= 0))) return true;
    if (m.parent < 0) return false;
    i = m.parent;
  }
}

[[noreturn]] void run_member();

void fork_children() {
  for (int c : me().children) {
    pid_t pid = ::fork();
    if (pid < 0) die_errno("fork");
    if (pid == 0) {
      become(c);
      run_member();
    }
    member_pid[c] = pid;
    const Member& cm = job().members[c];
    // Both sides set the group, whichever runs first (the usual shell idiom).
    if (cm.new_pgrp) ::setpgid(pid, pid);
    if (cm.join_pgrp_of >= 0) ::setpgid(pid, member_pid[cm.join_pgrp_of]);
  }
}

// After the children have what they need: keep only this member's own.
void drop_inherited() {
  for (const Channel& c : job().channels) {
    if (!is_inherited(c.kind) || !in_subtree(job(), c.creator, self.index)) continue;
    for (int side = 0; side < 2; ++side)
      if ((side == 0 ? c.a : c.b) != self.index && side_in_subtree(c, side, self.index))
        close_side(c, side);
  }
  for (const Region& g : job().regions) {
    if (!region_base[g.id] || g.creator == self.index) continue;
    bool user = false;
    for (int u : g.users) user |= u == self.index;
    if (!user) {
      unmap_region(g, region_base[g.id]);
      region_base[g.id] = nullptr;
    }
  }
  for (const SharedFile& f : job().files)
    if (f.creator != self.index && f.writer != self.index &&
        in_subtree(job(), f.creator, self.index) && in_subtree(job(), self.index, f.writer))
      ::close(f.fd);
  if (self.index == 0) {
    ::close(job().ctl_up[1]);
    ::close(job().ctl_go[0]);
    ::close(job().ctl_fin[0]);
  }
}

std::string file_path(const SharedFile& f) {
  return self.work + "/file." + std::to_string(f.id);
}

void record(const SharedFile& f, int step, std::vector<uint8_t>* out) {
  out->resize(f.record);
  for (size_t i = 0; i < f.record; i += 8) {
    uint64_t w = mix(job().seed, 0xf11e + uint64_t(f.id), uint64_t(step), i / 8);
    std::memcpy(out->data() + i, &w, std::min<size_t>(8, f.record - i));
  }
}

void open_files() {
  for (const SharedFile& f : job().files) {
    if (f.creator != self.index) continue;
    int fd = ::open(file_path(f).c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) die_errno("opening " + file_path(f));
    place(park(fd), f.fd);
  }
}

void write_records(int step) {
  std::vector<uint8_t> rec;
  for (const SharedFile& f : job().files)
    if (f.writer == self.index) {
      record(f, step, &rec);
      write_all(f.fd, rec.data(), rec.size(), "a shared file");
    }
}

// The offset is the open file description's: the writer's and the
// creator's must both be at the end of every record.
void check_offsets() {
  for (const SharedFile& f : job().files)
    if (f.writer == self.index || f.creator == self.index) {
      const off_t want = off_t(f.record) * job().steps, at = ::lseek(f.fd, 0, SEEK_CUR);
      if (at != want)
        die("f" + std::to_string(f.id) + ": the shared offset is " + std::to_string(at) + ", not " +
            std::to_string(want));
    }
}

void check_files() {
  std::vector<uint8_t> want, got;
  for (const SharedFile& f : job().files) {
    if (f.creator != self.index) continue;
    got.resize(f.record);
    for (int step = 0; step < job().steps; ++step) {
      record(f, step, &want);
      if (::pread(f.fd, got.data(), f.record, off_t(f.record) * step) != ssize_t(f.record) ||
          got != want)
        die("f" + std::to_string(f.id) + ": record " + std::to_string(step) + " differs");
    }
    struct stat st;
    if (::fstat(f.fd, &st) != 0 || st.st_size != off_t(f.record) * job().steps)
      die("f" + std::to_string(f.id) + " has " + std::to_string(st.st_size) + " bytes");
    ::close(f.fd);
    ::unlink(file_path(f).c_str());
  }
}

struct Writer {
  Slice slice;
  PageWalk walk;
  std::string what;
};

std::vector<Writer> writers_of(bool by_thread) {
  std::vector<Writer> out;
  for (const Region& g : job().regions)
    for (size_t u = 0; u < g.users.size(); ++u)
      if (g.users[u] == self.index && g.by_thread == by_thread && region_base[g.id]) {
        Slice s = slice_of(g, region_base[g.id], u);
        out.push_back({s, PageWalk(s.pattern, s.pages, job().steps, s.key),
                       "r" + std::to_string(g.id) + " slice " + std::to_string(u)});
      }
  return out;
}

pthread_barrier_t step_barrier;

void* thread_main(void*) {
  std::vector<Writer> ws = writers_of(true);
  std::vector<size_t> scratch;
  for (int s = 0; s < job().steps; ++s) {
    pthread_barrier_wait(&step_barrier);
    for (Writer& w : ws) write_step(w.slice, &w.walk, s, &scratch);
  }
  pthread_barrier_wait(&step_barrier);
  return nullptr;
}

void setup_signals() {
  bool notified = false;
  for (int c : me().children) notified |= job().members[c].rt_signal_step >= 0;
  if (notified) {
    struct sigaction sa {};
    sa.sa_sigaction = on_rt;
    sa.sa_flags = SA_SIGINFO | (me().rt_handler_restart ? SA_RESTART : 0);
    if (::sigaction(rt_notify(), &sa, nullptr) != 0) die_errno("sigaction");
  }
  if (me().signalfd >= 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, rt_queued());
    if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) die_errno("sigprocmask");
  }
}

void setup_local_fds() {
  const Member& m = me();
  if (m.timerfd >= 0) {
    int t = ::timerfd_create(CLOCK_MONOTONIC, 0);
    itimerspec its{{kTimerIntervalS, 0}, {kTimerValueS, 0}};
    if (t < 0 || ::timerfd_settime(t, 0, &its, nullptr) != 0) die_errno("timerfd");
    place(park(t), m.timerfd, false, false);
  }
  if (m.signalfd >= 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, rt_queued());
    int s = ::signalfd(-1, &set, SFD_NONBLOCK);
    if (s < 0) die_errno("signalfd");
    place(park(s), m.signalfd, false, true);
    sigval v;
    v.sival_int = self.index * 13 + 5;
    if (::sigqueue(::getpid(), rt_queued(), v) != 0) die_errno("sigqueue");
  }
  if (m.epoll_fd >= 0) {
    int ep = ::epoll_create1(0);
    if (ep < 0) die_errno("epoll_create1");
    place(park(ep), m.epoll_fd, false, false);
    for (const Channel& c : job().channels)
      for (int side = 0; side < 2; ++side)
        if ((side == 0 ? c.a : c.b) == self.index) {
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u64 = uint64_t(c.id) * 2 + uint64_t(side);
          if (::epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, side_of(c, side).rd, &ev) != 0)
            die_errno("epoll_ctl");
        }
  }
}

void setup_refusal() {
  const Member& m = me();
  if (m.refusal == Refusal::kNone) return;
  int sv[2];
  if (::socketpair(AF_UNIX, m.refusal == Refusal::kInFlight ? SOCK_DGRAM : SOCK_STREAM, 0, sv) != 0)
    die_errno("socketpair");
  sv[0] = park(sv[0]);
  sv[1] = park(sv[1]);
  place(sv[0], m.refusal_fds[0]);
  place(sv[1], m.refusal_fds[1]);
  if (m.refusal != Refusal::kOutsidePeer) return;
  // A peer outside the job: a grandchild that its parent abandons at once.
  pid_t helper = ::fork();
  if (helper < 0) die_errno("fork");
  if (helper == 0) {
    if (::fork() != 0) ::_exit(0);
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != m.refusal_fds[1]) ::close(fd);
    while (!file_exists(self.work + "/finish")) sleep_us(20000);
    ::_exit(0);
  }
  int st;
  while (::waitpid(helper, &st, 0) < 0 && errno == EINTR) {
  }
  ::close(m.refusal_fds[1]);
}

void refuse_now() {
  const Member& m = me();
  // A descriptor in flight: sent and never received.
  char byte = 'x';
  iovec iov{&byte, 1};
  char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = ctl;
  mh.msg_controllen = sizeof ctl;
  cmsghdr* cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &m.refusal_fds[1], sizeof(int));
  if (::sendmsg(m.refusal_fds[0], &mh, 0) != 1) die_errno("sendmsg SCM_RIGHTS");
}

struct Ends {
  std::vector<std::pair<const Channel*, int>> list;  // (channel, side), by channel id
};

Ends my_ends() {
  Ends e;
  for (const Channel& c : job().channels)
    for (int side = 0; side < 2; ++side)
      if ((side == 0 ? c.a : c.b) == self.index) e.list.push_back({&c, side});
  return e;
}

void wait_epoll(const Ends& ends) {
  std::set<uint64_t> mine;
  for (auto& [c, side] : ends.list) mine.insert(uint64_t(c->id) * 2 + uint64_t(side));
  epoll_event evs[32];
  for (;;) {
    int n = ::epoll_wait(me().epoll_fd, evs, 32, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die_errno("epoll_wait");
    for (int i = 0; i < n; ++i)
      if (!mine.count(evs[i].data.u64))
        die("epoll reported data " + std::to_string(evs[i].data.u64) + ", not one of its channels");
    if (n > 0) return;
  }
}

int run_steps(const Ends& ends, std::vector<Writer>* ws) {
  std::vector<size_t> scratch;
  int msgs = 0;
  for (int s = 0; s < job().steps; ++s) {
    if (me().thread) pthread_barrier_wait(&step_barrier);
    for (Writer& w : *ws) write_step(w.slice, &w.walk, s, &scratch);
    write_records(s);
    for (auto& [c, side] : ends.list) send_step(*c, side, s);
    if (me().epoll_fd >= 0 && !ends.list.empty()) wait_epoll(ends);
    for (auto& [c, side] : ends.list) {
      recv_step(*c, side, s);
      ++msgs;
    }
    if (me().rt_signal_step == s) {
      sigval v;
      v.sival_int = self.index + 1;
      if (::sigqueue(::getppid(), rt_notify(), v) != 0) die_errno("sigqueue to the parent");
    }
    if (me().refusal == Refusal::kInFlight && me().refusal_step == s) refuse_now();
    if (me().pace_us) sleep_us(me().pace_us);
  }
  if (me().thread) pthread_barrier_wait(&step_barrier);
  return msgs;
}

void check_local_fds() {
  const Member& m = me();
  if (m.timerfd >= 0) {
    itimerspec its;
    if (::timerfd_gettime(m.timerfd, &its) != 0) die_errno("timerfd_gettime");
    if (its.it_interval.tv_sec != kTimerIntervalS || its.it_interval.tv_nsec != 0)
      die("timerfd interval is " + std::to_string(its.it_interval.tv_sec) + " s");
    if (its.it_value.tv_sec >= kTimerValueS ||
        (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0))
      die("timerfd has " + std::to_string(its.it_value.tv_sec) + " s left");
  }
  if (m.signalfd >= 0) {
    signalfd_siginfo si;
    ssize_t n = ::read(m.signalfd, &si, sizeof si);
    if (n != ssize_t(sizeof si)) die_errno("reading the signalfd");
    if (si.ssi_signo != uint32_t(rt_queued()) || si.ssi_int != self.index * 13 + 5)
      die("signalfd gave signal " + std::to_string(si.ssi_signo) + " value " +
          std::to_string(si.ssi_int));
  }
  for (const Channel& c : job().channels)
    for (int side = 0; side < 2; ++side)
      if ((side == 0 ? c.a : c.b) == self.index && side_of(c, side).dup >= 0)
        check_shared(side_of(c, side).wr, side_of(c, side).dup, "a channel end");
}

void reap_children(pid_t zombie) {
  for (int c : me().children) {
    int st = 0;
    while (::waitpid(member_pid[c], &st, 0) < 0)
      if (errno != EINTR) die_errno("waitpid m" + std::to_string(c));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      die("m" + std::to_string(c) + " ended with status " + std::to_string(st));
  }
  if (zombie > 0) {
    int st = 0;
    while (::waitpid(zombie, &st, 0) < 0)
      if (errno != EINTR) die_errno("waitpid of the zombie");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != me().zombie_exit)
      die("the zombie child ended with status " + std::to_string(st));
  }
  int want = 0;
  for (int c : me().children)
    if (job().members[c].rt_signal_step >= 0) want += c + 1;
  if (rt_sum != want)
    die("children's signals added up to " + std::to_string(rt_sum) + ", not " +
        std::to_string(want));
}

uint64_t verify_memory() {
  uint64_t h = 0;
  for (const Region& g : job().regions) {
    if (!region_base[g.id]) continue;
    for (size_t u = 0; u < g.users.size(); ++u) {
      if (g.users[u] != self.index && g.creator != self.index) continue;
      std::string w = "r" + std::to_string(g.id) + " (" + backing_name(g.backing) + ") slice " +
                      std::to_string(u);
      h = mix(h, verify(slice_of(g, region_base[g.id], u), job().steps, w.c_str()));
    }
    if (g.creator == self.index) remove_region(g);
  }
  return h;
}

void write_result(int msgs, uint64_t mem) {
  std::string path = self.work + "/result." + std::to_string(self.index);
  std::ofstream f(path);
  f << "m" << self.index << " steps " << job().steps << " messages " << msgs << " memory " << mem
    << "\n";
  if (!f.flush()) die("writing " + path);
}

void set_ticker(unsigned us) {
  if (us) {
    struct sigaction sa {};
    sa.sa_handler = on_tick;
    sa.sa_flags = SA_RESTART;
    if (::sigaction(SIGALRM, &sa, nullptr) != 0) die_errno("sigaction SIGALRM");
  }
  itimerval it{{0, long(us)}, {0, long(us)}};
  if (::setitimer(ITIMER_REAL, &it, nullptr) != 0) die_errno("setitimer");
}

// The ticker still ticks (a checkpoint or a restore in between must not
// have lost it), then stops before the checks.
void check_ticker() {
  const sig_atomic_t before = ticks;
  sleep_us(4 * me().tick_us + 20000);
  if (ticks == before) die("its interval timer stopped ticking");
  set_ticker(0);
}

void run_member_body(const char* ready_file) {
  const Member& m = me();
  const int n = int(job().members.size());
  setup_signals();
  for (const Channel& c : job().channels)
    if (is_inherited(c.kind) && c.creator == self.index) make_inherited(c);
  for (const Region& g : job().regions)
    if (g.creator == self.index) region_base[g.id] = map_region(g);
  open_files();
  fork_children();
  drop_inherited();
  pid_t zombie = -1;
  if (m.zombie_exit >= 0) {
    zombie = ::fork();
    if (zombie < 0) die_errno("fork");
    if (zombie == 0) ::_exit(m.zombie_exit);
  }
  setup_passive(self.index);
  setup_active(self.index);
  setup_accept(self.index);
  setup_refusal();
  setup_local_fds();
  if (m.thread) {
    pthread_t t;
    pthread_barrier_init(&step_barrier, nullptr, 2);
    if (pthread_create(&t, nullptr, thread_main, nullptr) != 0) die("pthread_create failed");
    pthread_detach(t);
  }
  const std::vector<FdEntry> fds = fd_table();
  const pid_t pid = ::getpid(), ppid = ::getppid(), pgrp = ::getpgrp(), sid = ::getsid(0);
  char byte = 'u';
  if (self.index == 0) {
    for (int i = 1; i < n; ++i) read_all(job().ctl_up[0], &byte, 1, "the set-up pipe");
    std::string tmp = std::string(ready_file) + ".tmp";
    std::ofstream(tmp) << pid << "\n";
    if (::rename(tmp.c_str(), ready_file) != 0) die_errno("writing the ready file");
    for (int i = 1; i < n; ++i) write_all(job().ctl_go[1], &byte, 1, "the start pipe");
  } else {
    write_all(job().ctl_up[1], &byte, 1, "the set-up pipe");
    read_all(job().ctl_go[0], &byte, 1, "the start pipe");
  }
  // After set-up: a connect() that a signal interrupts goes on without its
  // caller and could not simply be called again.
  if (m.tick_us) set_ticker(m.tick_us);
  const Ends ends = my_ends();
  std::vector<Writer> ws = writers_of(false);
  const int msgs = run_steps(ends, &ws);
  // Nobody closes anything before every member has read all its messages
  // (a pty drops what its slave did not read when the master closes).
  if (self.index == 0) {
    for (int i = 1; i < n; ++i) read_all(job().ctl_up[0], &byte, 1, "the set-up pipe");
    while (!file_exists(self.work + "/finish")) sleep_us(10000);
    for (int i = 1; i < n; ++i) write_all(job().ctl_fin[1], &byte, 1, "the finish pipe");
  } else {
    write_all(job().ctl_up[1], &byte, 1, "the set-up pipe");
    read_all(job().ctl_fin[0], &byte, 1, "the finish pipe");
  }
  if (m.tick_us) check_ticker();
  compare_fd_tables(fds, fd_table());
  if (::getpid() != pid) die("its PID changed");
  if (self.index != 0 && ::getppid() != ppid) die("its parent changed");
  // A group or session led from outside the job is the restorer's after a
  // restore (docs/security.md); one led by a member must come back.
  if (::getpgrp() != pgrp && led_in_job(self.index, false)) die("its process group changed");
  if (::getsid(0) != sid && led_in_job(self.index, true)) die("its session changed");
  check_local_fds();
  reap_children(zombie);
  check_offsets();
  check_files();
  write_result(msgs, verify_memory());
}

void run_member() {
  run_member_body(nullptr);
  ::_exit(0);
}

}  // namespace

int run_root(const char* ready_file) {
  self.index = 0;
  region_base.assign(job().regions.size(), nullptr);
  member_pid.assign(job().members.size(), 0);
  member_pid[0] = ::getpid();
  for (const Channel& c : job().channels)
    if (c.kind == Kind::kFifo)
      for (const char* dir : {".ab", ".ba"}) {
        std::string p = self.work + "/fifo." + std::to_string(c.id) + dir;
        if (::mkfifo(p.c_str(), 0600) != 0 && errno != EEXIST) die_errno("mkfifo " + p);
      }
  for (const int* p : {job().ctl_up, job().ctl_go, job().ctl_fin}) {
    int fds[2];
    if (::pipe(fds) != 0) die_errno("pipe");
    fds[0] = park(fds[0]);
    fds[1] = park(fds[1]);
    place(fds[0], p[0]);
    place(fds[1], p[1]);
  }
  run_member_body(ready_file);
  std::ofstream out(self.work + "/result");
  for (size_t i = 0; i < job().members.size(); ++i) {
    std::ifstream in(self.work + "/result." + std::to_string(i));
    std::string line;
    if (!std::getline(in, line)) die("no result from m" + std::to_string(i));
    out << line << "\n";
  }
  out << "ok\n";
  return out.flush() ? 0 : 1;
}

}  // namespace jobgen
