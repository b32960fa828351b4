// Drawing a job from a seed. Every choice comes from one Rng in a fixed
// order, so a seed names one job for good: a failing seed is a regression
// test as it stands.
#include <algorithm>
#include <numeric>

#include "rng.hpp"
#include "spec.hpp"

namespace jobgen {

namespace {

constexpr int kMaxMembers = 8;
constexpr int kMaxDepth = 4;                // depth 0..4: five levels
constexpr int kFirstFd = 3, kLastFd = 899;  // placement numbers; 900+ are temporaries
constexpr int kTrackerFd = 1000;

// Job-wide distinct descriptor numbers: a number one process uses is never
// another object's in any process, so inherited descriptors never collide.
class FdPool {
 public:
  explicit FdPool(Rng* rng) {
    free_.resize(kLastFd - kFirstFd + 1);
    std::iota(free_.begin(), free_.end(), kFirstFd);
    for (size_t i = free_.size() - 1; i > 0; --i) std::swap(free_[i], free_[rng->below(i + 1)]);
    // Sometimes the number the pagemap-scan tracker prefers for its own
    // userfaultfd: the job's must win.
    if (rng->chance(0.15)) free_.push_back(kTrackerFd);
  }
  int take() {
    int fd = free_.back();
    free_.pop_back();
    return fd;
  }

 private:
  std::vector<int> free_;
};

Kind draw_kind(Rng* r) {
  static const std::vector<Kind> kinds = {
      Kind::kPipe,         Kind::kPipe,      Kind::kFifo,          Kind::kUnixStream,
      Kind::kUnixStream,   Kind::kUnixDgram, Kind::kUnixSeqpacket, Kind::kUnixNamed,
      Kind::kUnixAbstract, Kind::kTcp4,      Kind::kTcp4,          Kind::kTcp6,
      Kind::kUdp,          Kind::kUdp,       Kind::kEventfd,       Kind::kPty};
  return r->pick(kinds);
}

size_t draw_msg(Rng* r, Kind k) {
  switch (k) {
    case Kind::kEventfd:
      return 8;
    case Kind::kPty:
      return size_t(r->range(1, 200));
    default:
      return size_t(r->chance(0.2) ? r->range(1, 8) : r->range(9, 1500));
  }
}

Side draw_side(Rng* r, FdPool* fds, Kind k) {
  Side s;
  s.rd = fds->take();
  s.wr = (k == Kind::kPipe || k == Kind::kFifo || k == Kind::kEventfd) ? fds->take() : s.rd;
  if (r->chance(0.15)) s.dup = fds->take();
  s.cloexec = r->chance(0.3);
  s.nonblock = r->chance(0.25);
  return s;
}

void draw_tree(Rng* r, Job* job) {
  const int n = int(r->range(2, kMaxMembers));
  job->members.resize(n);
  for (int i = 0; i < n; ++i) {
    Member& m = job->members[i];
    m.index = i;
    if (i == 0) continue;
    std::vector<int> parents;
    for (int p = 0; p < i; ++p)
      if (job->members[p].depth < kMaxDepth) parents.push_back(p);
    m.parent = r->pick(parents);
    m.depth = job->members[m.parent].depth + 1;
    job->members[m.parent].children.push_back(i);
  }
}

void draw_member_state(Rng* r, FdPool* fds, Job* job, Member* m) {
  if (m->index != 0) {
    m->new_session = r->chance(0.12);
    m->new_pgrp = !m->new_session && r->chance(0.25);
    if (!m->new_session && !m->new_pgrp && r->chance(0.3)) {
      // An earlier sibling that leads its own group in the same session.
      const Member& p = job->members[m->parent];
      for (int sib : p.children)
        if (sib < m->index && job->members[sib].new_pgrp) m->join_pgrp_of = sib;
    }
    if (r->chance(0.4)) m->rt_signal_step = int(r->range(0, job->steps - 1));
  }
  if (r->chance(0.25)) m->zombie_exit = int(r->range(0, 99));
  m->thread = r->chance(0.25);
  if (r->chance(0.35)) m->epoll_fd = fds->take();
  if (r->chance(0.25)) m->timerfd = fds->take();
  if (r->chance(0.2)) m->signalfd = fds->take();
  m->rt_handler_restart = r->chance(0.6);
  m->pace_us = r->chance(0.4) ? 0 : unsigned(r->range(300, 6000));
}

void draw_channels(Rng* r, FdPool* fds, Job* job) {
  const int n = int(job->members.size());
  const int count = int(r->range(n - 1, 2 * n + 2));
  for (int i = 0; i < count; ++i) {
    Channel c;
    c.id = i;
    c.kind = draw_kind(r);
    c.a = int(r->below(n));
    // Sometimes both ends in one process (a pipe to itself, a connection
    // accepted from its own listener).
    if (r->chance(0.1)) {
      c.b = c.a;
    } else {
      do c.b = int(r->below(n));
      while (c.b == c.a);
    }
    c.creator = lca(*job, c.a, c.b);
    c.msg = draw_msg(r, c.kind);
    c.sa = draw_side(r, fds, c.kind);
    c.sb = draw_side(r, fds, c.kind);
    if (c.kind == Kind::kUdp) {
      c.udp_connected = r->chance(0.6);
      c.port_a = uint16_t(20000 + 2 * i);
      c.port_b = uint16_t(20001 + 2 * i);
    }
    if (c.kind == Kind::kUnixNamed || c.kind == Kind::kUnixAbstract) c.seqpacket = r->chance(0.3);
    if (has_listener(c.kind)) {
      // Join a listener of the same kind that a already has, or open one.
      int svc = -1;
      for (Service& s : job->services)
        if (s.kind == c.kind && s.owner == c.a && s.seqpacket == c.seqpacket && r->chance(0.5))
          svc = s.id;
      if (svc < 0) {
        Service s;
        s.id = int(job->services.size());
        s.kind = c.kind;
        s.owner = c.a;
        s.fd = fds->take();
        s.keep = r->chance(0.8);
        s.reuse = r->chance(0.5);
        s.seqpacket = c.seqpacket;
        s.port = uint16_t(30000 + s.id);
        job->services.push_back(s);
        svc = s.id;
      }
      c.service = svc;
      job->services[svc].channels.push_back(c.id);
      if ((c.kind == Kind::kTcp4 || c.kind == Kind::kTcp6) && r->chance(0.2))
        c.port_b = uint16_t(31000 + i);  // the client binds its own port
    }
    job->channels.push_back(c);
  }
}

Pattern draw_pattern(Rng* r, size_t pages) {
  static const std::vector<Pattern> all = {Pattern::kBand,  Pattern::kSparse, Pattern::kStream,
                                           Pattern::kSweep, Pattern::kPhase,  Pattern::kQuiet};
  Pattern p;
  do p = r->pick(all);
  while (p == Pattern::kSweep && pages > 512);
  return p;
}

void draw_regions(Rng* r, FdPool* fds, Job* job) {
  for (Member& m : job->members) {
    if (!r->chance(0.8)) continue;
    Region g;
    g.id = int(job->regions.size());
    g.creator = m.index;
    g.users = {m.index};
    g.slice_pages = size_t(r->chance(0.1) ? r->range(2048, 12288) : r->range(1, 1024));
    g.patterns = {draw_pattern(r, g.slice_pages)};
    job->regions.push_back(g);
  }
  for (Member& m : job->members) {
    if (!m.thread) continue;
    Region g;
    g.id = int(job->regions.size());
    g.creator = m.index;
    g.users = {m.index};
    g.by_thread = true;
    g.slice_pages = size_t(r->range(1, 512));
    g.patterns = {draw_pattern(r, g.slice_pages)};
    job->regions.push_back(g);
  }
  const int shared = int(r->range(0, 2));
  for (int i = 0; i < shared; ++i) {
    std::vector<int> parents;
    for (const Member& m : job->members)
      if (!m.children.empty()) parents.push_back(m.index);
    Region g;
    g.id = int(job->regions.size());
    g.creator = r->pick(parents);
    for (const Member& m : job->members)
      if (in_subtree(*job, g.creator, m.index) && (m.index != g.creator || r->chance(0.5)) &&
          (g.users.empty() || r->chance(0.7)))
        g.users.push_back(m.index);
    static const std::vector<Backing> backs = {Backing::kSharedAnon, Backing::kMemfd,
                                               Backing::kSysv, Backing::kShmFile};
    g.backing = r->pick(backs);
    g.slice_pages = size_t(r->range(1, 64));
    for (size_t u = 0; u < g.users.size(); ++u)
      g.patterns.push_back(draw_pattern(r, g.slice_pages));
    if ((g.backing == Backing::kMemfd || g.backing == Backing::kShmFile) && r->chance(0.5))
      g.fd = fds->take();
    job->regions.push_back(g);
  }
}

void draw_files(Rng* r, FdPool* fds, Job* job) {
  const int n = r->chance(0.5) ? int(r->range(1, 2)) : 0;
  for (int i = 0; i < n; ++i) {
    SharedFile f;
    f.id = i;
    f.creator = int(r->below(job->members.size()));
    std::vector<int> below;
    for (const Member& m : job->members)
      if (m.index != f.creator && in_subtree(*job, f.creator, m.index)) below.push_back(m.index);
    f.writer = below.empty() ? f.creator : r->pick(below);
    f.fd = fds->take();
    f.record = size_t(r->range(8, 200));
    job->files.push_back(f);
  }
}

void draw_refusal(Rng* r, FdPool* fds, Job* job) {
  if (!r->chance(0.07)) return;
  Member& m = job->members[r->below(job->members.size())];
  m.refusal = r->chance(0.6) ? Refusal::kInFlight : Refusal::kOutsidePeer;
  m.refusal_step = m.refusal == Refusal::kInFlight ? int(r->range(0, job->steps / 2)) : 0;
  m.refusal_fds[0] = fds->take();
  m.refusal_fds[1] = fds->take();
}

void draw_plan(Rng* r, Plan* p) {
  p->full_delay_ms = int(r->range(0, 500));
  p->full_live = r->chance(0.3);
  const uint64_t w = r->below(100);
  const int incrs = w < 15 ? 0 : w < 55 ? 1 : w < 85 ? 2 : 3;
  for (int i = 0; i < incrs; ++i) {
    p->incr_delay_ms.push_back(int(r->range(0, 400)));
    p->incr_live.push_back(r->chance(0.3));
  }
  p->compress = r->chance(0.15);
  p->kill_delay_ms = int(r->range(0, 300));
  p->kill_by_tool = r->chance(0.2);
  if (incrs > 0 && r->chance(0.2)) p->restore_generation = int(r->range(0, incrs - 1));
  p->tracker_pick = unsigned(r->below(256));
}

}  // namespace

Job draw(uint64_t seed) {
  Rng r(seed);
  Job job;
  job.seed = seed;
  job.steps = int(r.range(60, 250));
  FdPool fds(&r);
  draw_tree(&r, &job);
  for (Member& m : job.members) draw_member_state(&r, &fds, &job, &m);
  draw_channels(&r, &fds, &job);
  draw_regions(&r, &fds, &job);
  draw_files(&r, &fds, &job);
  draw_refusal(&r, &fds, &job);
  for (int* p : {job.ctl_up, job.ctl_go, job.ctl_fin}) {
    p[0] = fds.take();
    p[1] = fds.take();
  }
  draw_plan(&r, &job.plan);
  // Drawn last, so the seeds drawn before tickers existed keep their jobs.
  for (Member& m : job.members)
    if (r.chance(0.3)) m.tick_us = unsigned(r.range(300, 20000));
  return job;
}

int lca(const Job& job, int x, int y) {
  while (job.members[x].depth > job.members[y].depth) x = job.members[x].parent;
  while (job.members[y].depth > job.members[x].depth) y = job.members[y].parent;
  while (x != y) {
    x = job.members[x].parent;
    y = job.members[y].parent;
  }
  return x;
}

bool in_subtree(const Job& job, int root, int x) {
  for (; x >= 0; x = job.members[x].parent)
    if (x == root) return true;
  return false;
}

bool Job::expects_refusal() const {
  return std::any_of(members.begin(), members.end(),
                     [](const Member& m) { return m.refusal != Refusal::kNone; });
}

}  // namespace jobgen
