// cr_job's coordination of the node agents (coordinator.hpp).
#include "nodes/coordinator.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "migrate/sender_link.hpp"
#include "nodes/wire.hpp"
#include "util/clock.hpp"

namespace ckpt::nodes {

namespace {

struct Link {
  std::string addr;
  std::unique_ptr<migrate::SenderLink> conn;
  bool over = false;  // the agent ended its round (failed) or the link broke
  Message last;
};

Result<std::vector<Link>> connect_all(const Coordination& c) {
  CKPT_ASSIGN(std::vector<uint8_t> token, migrate::load_token(c.token_file));
  std::vector<Link> links;
  for (const Node& n : c.nodes) {
    Link l;
    l.addr = n.addr;
    auto fd = migrate::connect_to(n.addr, c.timeout);
    if (!fd.ok()) return fd.error().context("node " + n.addr);
    l.conn = std::make_unique<migrate::SenderLink>(std::move(*fd));
    auto first = migrate::sender_handshake(l.conn->w, l.conn->r, token);
    if (!first.ok()) return first.error().context("node " + n.addr);
    links.push_back(std::move(l));
  }
  return links;
}

// Tells every agent still in the round to abort, and reads its last word.
void abort_all(std::vector<Link>& links, const std::string& why) {
  for (Link& l : links)
    if (!l.over && !send_step(l.conn->w, {kAbort, 0, 0, why}).ok()) l.over = true;
  for (Link& l : links)
    if (!l.over) (void)read_step(l.conn->r, "node " + l.addr);
}

// Reads every agent's next step, which must be `want`; any other outcome
// aborts the round everywhere and names the first node that failed.
// `first_at`: when the first answer arrived.
Status gather(std::vector<Link>& links, uint32_t want, double* first_at = nullptr) {
  std::string why;
  for (Link& l : links) {
    auto m = read_step(l.conn->r, "node " + l.addr);
    if (first_at && l.addr == links[0].addr) *first_at = now_seconds();
    std::string bad;
    if (!m.ok()) {
      bad = m.error().message;
      l.over = true;
    } else if (m->step == kFailed) {
      bad = m->text;
      l.over = true;
    } else if (m->step != want) {
      bad = std::string("protocol error: expected ") + step_name(want) + ", got " +
            step_name(m->step);
    } else {
      l.last = *m;
    }
    if (!bad.empty() && why.empty()) why = "node " + l.addr + ": " + bad;
  }
  if (why.empty()) return {};
  abort_all(links, why);
  return make_error(ECANCELED, why + " (round aborted on every node)");
}

Status send_all(std::vector<Link>& links, const Message& m) {
  for (Link& l : links)
    if (Status s = send_step(l.conn->w, m); !s.ok()) {
      l.over = true;
      const std::string why = "node " + l.addr + ": " + s.error().message;
      abort_all(links, why);
      return make_error(s.error().code, why + " (round aborted on every node)");
    }
  return {};
}

}  // namespace

Result<std::vector<Node>> read_nodes(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ENOENT, "cannot read the node file " + path);
  std::vector<Node> out;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream words(line);
    Node n;
    if (!(words >> n.addr)) continue;
    std::string pid, extra;
    if (words >> pid) {
      char* end = nullptr;
      long v = std::strtol(pid.c_str(), &end, 10);
      if (*end || v <= 0)
        return make_error(EINVAL, path + ":" + std::to_string(no) + ": not a PID: " + pid);
      n.pid = pid_t(v);
    }
    if (words >> extra)
      return make_error(EINVAL, path + ":" + std::to_string(no) + ": expected HOST:PORT [PID]");
    out.push_back(n);
  }
  if (out.empty()) return make_error(EINVAL, path + ": no nodes");
  return out;
}

Result<RoundOutcome> coordinated_checkpoint(const Coordination& c, bool full) {
  for (const Node& n : c.nodes)
    if (n.pid <= 0) return make_error(EINVAL, "node " + n.addr + ": no PID of its part given");
  CKPT_ASSIGN(std::vector<Link> links, connect_all(c));
  RoundOutcome out;
  const double t0 = now_seconds();
  for (size_t i = 0; i < links.size(); ++i)
    if (Status s = send_step(links[i].conn->w,
                             {kCheckpoint, uint64_t(c.nodes[i].pid), full ? 1u : 0u, {}});
        !s.ok()) {
      links[i].over = true;
      abort_all(links, "node " + links[i].addr + ": " + s.error().message);
      return s.error().context("node " + links[i].addr);
    }
  double t_frozen = 0;
  CKPT_TRY(gather(links, kFrozen, &t_frozen));  // phase 1: all frozen, nothing read
  CKPT_TRY(send_all(links, {kGo}));
  CKPT_TRY(gather(links, kCaptured));  // phase 2: all saved (in memory)
  CKPT_TRY(send_all(links, {kGo}));    // released
  out.frozen_seconds = now_seconds() - t_frozen;
  CKPT_TRY(gather(links, kWritten));  // all durable, none visible
  CKPT_TRY(send_all(links, {kGo}));   // commit
  CKPT_TRY(gather(links, kCommitted));
  out.total_seconds = now_seconds() - t0;
  for (const Link& l : links) {
    NodeOutcome n;
    n.addr = l.addr;
    n.generation = l.last.a;
    n.frozen_seconds = double(l.last.b) / 1e6;
    n.processes = std::strtoull(l.last.text.c_str(), nullptr, 10);
    out.nodes.push_back(n);
  }
  out.generation = out.nodes[0].generation;
  for (const NodeOutcome& n : out.nodes)
    if (n.generation != out.generation)
      return make_error(EPROTO, "node " + n.addr + " committed generation " +
                                    std::to_string(n.generation) + ", node " + out.nodes[0].addr +
                                    " generation " + std::to_string(out.generation) +
                                    ": restart them with --generation");
  return out;
}

Result<RoundOutcome> coordinated_restart(const Coordination& c, uint64_t generation) {
  CKPT_ASSIGN(std::vector<Link> links, connect_all(c));
  RoundOutcome out;
  const double t0 = now_seconds();
  CKPT_TRY(send_all(links, {kRestore, generation, 0, {}}));
  CKPT_TRY(gather(links, kReady));  // every part built, connections in repair mode
  out.generation = links[0].last.a;
  for (const Link& l : links)
    if (l.last.a != out.generation) {
      const std::string why = "node " + l.addr + " holds generation " + std::to_string(l.last.a) +
                              ", node " + links[0].addr + " generation " +
                              std::to_string(out.generation);
      abort_all(links, why);
      return make_error(EINVAL, why + ": give --generation (round aborted on every node)");
    }
  CKPT_TRY(send_all(links, {kGo}));
  CKPT_TRY(gather(links, kRunning));
  out.total_seconds = now_seconds() - t0;
  for (const Link& l : links) {
    NodeOutcome n;
    n.addr = l.addr;
    n.generation = out.generation;
    n.pid = pid_t(l.last.a);
    out.nodes.push_back(n);
  }
  return out;
}

namespace {

// `cmd` by /bin/sh with CKPT_FROM and CKPT_TO; its failure named.
Status run_takeover(const std::string& cmd, const std::string& from, const std::string& to) {
  const pid_t child = ::fork();
  if (child < 0) return sys_error("fork");
  if (child == 0) {
    ::setenv("CKPT_FROM", from.c_str(), 1);
    ::setenv("CKPT_TO", to.c_str(), 1);
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int st = 0;
  while (::waitpid(child, &st, 0) < 0)
    if (errno != EINTR) return sys_error("waitpid");
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return {};
  return make_error(EIO, "the takeover command (" + from + " -> " + to + ") " +
                             (WIFEXITED(st) ? "exited with " + std::to_string(WEXITSTATUS(st))
                                            : "ended by signal " + std::to_string(WTERMSIG(st))));
}

// Asks the agent `to` whether the part whose root PID is `pid` runs there
// (once no migration to it is in progress).
Result<pid_t> part_at(const Coordination& c, const std::string& to, pid_t pid) {
  Coordination one = c;
  one.nodes = {Node{to, pid}};
  CKPT_ASSIGN(std::vector<Link> links, connect_all(one));
  CKPT_TRY(send_step(links[0].conn->w, {kWhere, uint64_t(pid), 0, {}}));
  CKPT_ASSIGN(Message m, read_step(links[0].conn->r, "node " + to));
  if (m.step == kRunning) return pid_t(m.a);
  if (m.step == kFailed) return make_error(ESRCH, m.text);
  return make_error(EPROTO,
                    std::string("protocol error: expected RUNNING, got ") + step_name(m.step));
}

// The node of `c` whose part is to move from `from` to `to`, once the
// request is found sound.
Result<const Node*> moving_node(const Coordination& c, const std::string& from,
                                const std::string& to, const std::string& takeover) {
  const Node* src = nullptr;
  for (const Node& n : c.nodes)
    if (n.addr == from) src = &n;
  if (!src) return make_error(EINVAL, "node " + from + " is not in the node file");
  if (src->pid <= 0) return make_error(EINVAL, "node " + from + ": no PID of its part given");
  for (const Node& n : c.nodes)
    if (n.addr == to) return make_error(EINVAL, "node " + to + " already holds a part of the job");
  if (takeover.empty()) return make_error(EINVAL, "no takeover command given");
  return src;
}

// migrate_node's session with the source node's agent, one step per method:
// the part sent, the address taken over, the part committed at `to` (or,
// when that fails, the address moved back).
class NodeMove {
 public:
  NodeMove(const Coordination& c, const Node& src, const std::string& from, const std::string& to,
           const std::string& takeover, Link& l)
      : c_(c), src_(src), from_(from), to_(to), takeover_(takeover), l_(l), name_("node " + from) {
    out_.from = from;
    out_.to = to;
  }

  // MIGRATE, until the agent says SENT.
  Status send_part(bool live);
  // The address moved to `to` by the takeover command (undone on failure).
  Status take_over();
  // GO, and what became of the part.
  Result<MoveOutcome> commit();

 private:
  // The source agent lost after GO, with the address at the destination.
  Result<MoveOutcome> source_lost(const Error& e);
  // The destination failed once it had the address.
  Error destination_failed(const std::string& why);
  // The agent's MOVED: the part runs at `to`.
  MoveOutcome moved(const Message& m);
  std::string lost(const Error& e) const { return name_ + ": " + e.message; }

  const Coordination& c_;
  const Node& src_;
  const std::string& from_;
  const std::string& to_;
  const std::string& takeover_;
  Link& l_;
  const std::string name_;
  MoveOutcome out_;
  const double t0_ = now_seconds();
};

Status NodeMove::send_part(bool live) {
  if (Status s = send_step(l_.conn->w, {kMigrate, uint64_t(src_.pid), live ? 1u : 0u, to_});
      !s.ok())
    return make_error(s.error().code, lost(s.error()));
  // The part runs at `from` until the agent says SENT (pre-copy rounds). An
  // agent lost before that (killed, its node or link down) has not told the
  // destination to start it: the part there was released (by the agent or,
  // with the agent gone, by the kernel) and the destination drops what it got.
  auto sent = read_step(l_.conn->r, name_);
  if (!sent.ok())
    return make_error(sent.error().code,
                      lost(sent.error()) + " (the part runs on at " + from_ + ")");
  const Message& m = *sent;
  if (m.step == kFailed)
    return make_error(ECANCELED, name_ + ": " + m.text + " (the part runs on there)");
  if (m.step != kSent)
    return make_error(EPROTO, name_ + ": protocol error: expected SENT, got " + step_name(m.step));
  return {};
}

Status NodeMove::take_over() {
  const double t_take = now_seconds();
  if (Status s = run_takeover(takeover_, from_, to_); !s.ok()) {
    (void)run_takeover(takeover_, to_, from_);  // whatever it did, undone as far as it goes
    (void)send_step(l_.conn->w, {kAbort, 0, 0, s.error().message});
    (void)read_step(l_.conn->r, name_);
    return make_error(s.error().code, s.error().message + " (the part runs on at " + from_ + ")");
  }
  out_.takeover_seconds = now_seconds() - t_take;
  return {};
}

Result<MoveOutcome> NodeMove::commit() {
  Status go = send_step(l_.conn->w, {kGo});
  auto last = go.ok() ? read_step(l_.conn->r, name_) : Result<Message>(go.error());
  if (!last.ok()) return source_lost(last.error());
  const Message& m = *last;
  if (m.step == kFailed) return destination_failed(m.text);
  if (m.step != kMoved)
    return make_error(EPROTO, name_ + ": protocol error: expected MOVED, got " + step_name(m.step));
  return moved(m);
}

Result<MoveOutcome> NodeMove::source_lost(const Error& e) {
  // It may have told the destination to start the part (its copy then dies
  // with it) or not (its copy was released): the destination knows which.
  auto there = part_at(c_, to_, src_.pid);
  if (there.ok()) {
    out_.total_seconds = now_seconds() - t0_;
    out_.pid = *there;
    out_.note = lost(e) + " after it committed: the part runs at " + to_;
    return out_;
  }
  Status back = run_takeover(takeover_, to_, from_);
  if (!back.ok())
    return make_error(EIO, lost(e) + "; " + to_ + ": " + there.error().message +
                               "; moving the address back failed too: " + back.error().message);
  return make_error(
      e.code, lost(e) + " (the address moved back; " + to_ + ": " + there.error().message + ")");
}

Error NodeMove::destination_failed(const std::string& why) {
  // Back to the source, then the part there is released.
  Status back = run_takeover(takeover_, to_, from_);
  (void)send_step(l_.conn->w, {kGo});
  (void)read_step(l_.conn->r, name_);
  if (!back.ok())
    return make_error(
        EIO, name_ + ": " + why + "; moving the address back failed too: " + back.error().message);
  return make_error(ECANCELED, name_ + ": " + why +
                                   " (the address moved back, the part runs on at " + from_ + ")");
}

MoveOutcome NodeMove::moved(const Message& m) {
  out_.total_seconds = now_seconds() - t0_;
  out_.pid = pid_t(m.a);
  out_.downtime_seconds = double(m.b) / 1e6;
  unsigned long long rounds = 0, bytes = 0, procs = 0;
  double secs = 0;
  if (std::sscanf(m.text.c_str(), "%llu %llu %lf %llu", &rounds, &bytes, &secs, &procs) == 4) {
    out_.rounds = rounds;
    out_.bytes = bytes;
    out_.migration_seconds = secs;
    out_.processes = procs;
  }
  return out_;
}

}  // namespace

Result<MoveOutcome> migrate_node(const Coordination& c, const std::string& from,
                                 const std::string& to, bool live, const std::string& takeover) {
  CKPT_ASSIGN(const Node* src, moving_node(c, from, to, takeover));
  Coordination one = c;
  one.nodes = {*src};
  CKPT_ASSIGN(std::vector<Link> links, connect_all(one));
  NodeMove move(c, *src, from, to, takeover, links[0]);
  CKPT_TRY(move.send_part(live));
  CKPT_TRY(move.take_over());
  return move.commit();
}

Status rewrite_nodes(const std::string& path, const std::vector<Node>& nodes,
                     const MoveOutcome& o) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return make_error(EIO, "cannot write " + tmp);
    for (const Node& n : nodes) {
      const bool moved = n.addr == o.from;
      f << (moved ? o.to : n.addr);
      const pid_t pid = moved ? o.pid : n.pid;
      if (pid > 0) f << ' ' << pid;
      f << '\n';
    }
    if (!f.flush()) return make_error(EIO, "cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return sys_error("renaming " + tmp);
  return {};
}

}  // namespace ckpt::nodes
