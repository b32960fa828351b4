// One node's part of a job moved to another node's agent (move.hpp).
#include "nodes/move.hpp"

#include <fcntl.h>
#include <ftw.h>
#include <sys/file.h>
#include <unistd.h>

#include <ckpt/ckpt.hpp>
#include <ckpt/migrate.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "migrate/job_stream.hpp"
#include "migrate/sender_link.hpp"
#include "nodes/announce.hpp"
#include "nodes/lock_journal.hpp"
#include "restore/restore_held.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"

namespace ckpt::nodes {

namespace {

using migrate::Frame;
using migrate::FrameReader;
using migrate::FrameWriter;

}  // namespace

void remove_tree(const std::string& dir) {
  ::nftw(
      dir.c_str(),
      [](const char* p, const struct stat*, int type, FTW*) {
        return type == FTW_DP ? ::rmdir(p) : ::unlink(p);
      },
      16, FTW_DEPTH | FTW_PHYS);
}

namespace {

// A migration that ends before COMMIT: the address may be on its way here
// (the source was lost while cr_job moved it), so the locks stay; the
// daemon removes them later unless the address is here (lock_journal).
void note(const AgentConfig& cfg, const std::string& line) {
  if (cfg.log) cfg.log(LogKind::note, line);
}

void keep_until_settled(const AgentConfig& cfg, const std::vector<sockets::Connection>& locked) {
  if (locked.empty()) return;
  note(cfg, std::to_string(locked.size()) + " lock(s) kept until the address settles");
}

}  // namespace

Result<std::vector<sockets::Connection>> outside_of_generation(const std::string& gen_dir) {
  CKPT_ASSIGN(image::JobMeta jm, image::read_job_or_root(gen_dir));
  std::vector<sockets::Connection> out;
  const pid_t root = jm.members[0].pid;
  for (const image::JobMember& m : jm.members) {
    if (m.zombie()) continue;
    CKPT_ASSIGN(auto rd, image::SnapshotReader::open(image::member_dir(gen_dir, m.pid, root)));
    for (const image::FileRecord& f : rd->meta().files)
      if (sockets::is_outside(f)) out.push_back(sockets::connection_of(f));
  }
  return out;
}

Status serve_migrate(FrameWriter& w, FrameReader& r, const AgentConfig& cfg, const Message& req) {
  MigrateOptions o;
  o.to = req.text;
  o.token_file = cfg.token_file;
  o.pid = pid_t(req.a);
  o.tree = true;
  o.live = req.b == 1;
  o.tcp_established = true;  // the connections to the other nodes' parts
  o.timeout_seconds = cfg.timeout;
  if (o.pid <= 0) return fail(w, make_error(EINVAL, "no root PID given"));
  if (o.to.empty()) return fail(w, make_error(EINVAL, "no destination agent given"));
  std::vector<sockets::Connection> moved;
  bool reported = false;
  migrate::JobMigrateHooks hooks;
  hooks.before_commit = [&](const std::string& gen_dir) -> Status {
    if (auto c = outside_of_generation(gen_dir); c.ok()) moved = std::move(*c);
    // The part is frozen, its connections locked here, its state at the
    // destination: cr_job moves the address now and says GO.
    return report_and_wait(w, r, {kSent});
  };
  hooks.commit_failed = [&](const Error& e) {
    // The address is at the destination: cr_job moves it back (GO) before
    // the part is released here.
    (void)send_step(w, {kFailed, 0, 0, "destination " + o.to + ": " + e.message});
    (void)read_step(r, "cr_job");
    reported = true;
  };
  auto st = migrate::migrate_job(o, hooks);
  if (!st.ok()) {
    if (reported) return st.error();
    return fail(w, st.error().context("to " + o.to));
  }
  // The connections live at the destination now (the address went with
  // them); this node's parked copies are gone with the killed part.
  sockets::unlock_all(moved);
  char text[160];
  std::snprintf(text, sizeof text, "%zu %llu %.6f %llu", st->rounds.size(),
                static_cast<unsigned long long>(st->bytes_total), st->migration_seconds,
                static_cast<unsigned long long>(st->processes));
  return send_step(w,
                   {kMoved, uint64_t(st->remote_pid), uint64_t(st->downtime_seconds * 1e6), text});
}

namespace {

// Tells the sending agent why the migration is refused, and returns it.
Status refuse(FrameWriter& w, const Error& e) {
  (void)w.send(migrate::kError, e.message.data(), std::min<size_t>(e.message.size(), 4000));
  return e;
}

// serve_incoming's part of the session: the generations staged as they
// arrive, the connections they hold to other nodes locked, the part
// restored from the generation COMMIT names.
class IncomingPart {
 public:
  IncomingPart(FrameWriter& w, const AgentConfig& cfg, const std::string& staging)
      : w_(w), cfg_(cfg), staging_(staging), in_(staging, 1) {}

  // A JOB_BEGIN, JOB_FILE or JOB_END frame.
  Status on_job_frame(const Frame& f);
  Status on_commit(const Frame& f);
  bool committed() const { return committed_; }
  // The session ends: before COMMIT, the locks stay (keep_until_settled).
  void ending() const {
    if (!committed_) keep_until_settled(cfg_, locked_);
  }

 private:
  // Locks the connections to other nodes of received generation `gen` that
  // are not locked yet.
  Status lock_outside(uint64_t gen);

  FrameWriter& w_;
  const AgentConfig& cfg_;
  const std::string staging_;
  migrate::JobIncoming in_;
  // Locked here before the address arrives: until the restore rebuilds a
  // connection, the other node's retransmissions must not meet a reset.
  std::vector<sockets::Connection> locked_;
  bool committed_ = false;
  uint64_t committed_gen_ = 0;
};

Status IncomingPart::on_job_frame(const Frame& f) {
  uint64_t done = 0;
  if (Status s = in_.on_frame(f, &done); !s.ok()) return refuse(w_, s.error());
  if (!done) return {};
  CKPT_TRY(lock_outside(done));
  note(cfg_, "generation " + std::to_string(done) + " received, " + std::to_string(locked_.size()) +
                 " connections to other nodes locked");
  std::vector<uint8_t> p;
  migrate::put_u64(p, done);
  return w_.send(migrate::kApplied, p.data(), p.size());
}

Status IncomingPart::lock_outside(uint64_t gen) {
  auto conns = outside_of_generation(image::generation_dir(staging_, gen));
  if (!conns.ok()) return refuse(w_, conns.error());
  for (const sockets::Connection& c : *conns) {
    bool have = false;
    for (const sockets::Connection& l : locked_) have = have || sockets::same_connection(l, c);
    if (have) continue;
    if (Status s = sockets::lock_connection(c); !s.ok()) return refuse(w_, s.error());
    locked_.push_back(c);
  }
  return {};
}

Status IncomingPart::on_commit(const Frame& f) {
  // Again, the same: from a killed sender's witness (migrate/witness.hpp).
  if (committed_ && f.len == 8 && migrate::get_u64(f.data) == committed_gen_) return {};
  if (f.len != 8 || committed_) return refuse(w_, make_error(EPROTO, "unexpected COMMIT"));
  RestoreOptions o;
  o.dir = staging_;
  o.log = cfg_.log;
  o.generation = migrate::get_u64(f.data);
  // The locks stay on failure: the address may be here until cr_job
  // moves it back, and the other node must not see a reset meanwhile.
  // RUNNING goes out right before the part is let go: a session that
  // dies in between leaves no copy (its members die with their
  // tracer), never two. cr_recv closes that window with a second
  // process (migrate/handover.hpp); this session is one process, and
  // the window stays (docs/security.md). Best effort: a sender that is
  // gone took its source with it.
  auto res = restore::restore_held(o, nullptr, [&](pid_t root) {
    std::vector<uint8_t> p;
    migrate::put_u32(p, uint32_t(root));
    (void)w_.send(migrate::kRunning, p.data(), p.size());
  });
  if (!res.ok()) return refuse(w_, res.error().context("restoring the part"));
  committed_ = true;
  committed_gen_ = o.generation;
  char line[128];
  std::snprintf(line, sizeof line, "part restored in %.3f s, root PID %d (%llu processes)",
                res->seconds, res->pid, static_cast<unsigned long long>(res->processes));
  note(cfg_, line);
  // The address came with the part: the neighbours learn its new
  // link-layer address now rather than after their entry expires.
  if (int n = announce_addresses(locked_); n > 0)
    note(cfg_, std::to_string(n) + " address(es) announced (gratuitous ARP)");
  return {};
}

}  // namespace

Status serve_incoming(FrameWriter& w, FrameReader& r, const AgentConfig& cfg, const Frame& first) {
  // Held (shared) while this migration is in progress: serve_where waits
  // for it. Released by the kernel however the session ends; declared
  // first so that it outlives the removal of the staging files below.
  UniqueFd busy(::open(cfg.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (busy.valid()) (void)::flock(busy.get(), LOCK_SH);
  // .incoming-PID-: the daemon removes it if this session is killed.
  std::string staging = cfg.dir + "/.incoming-" + std::to_string(::getpid()) + "-XXXXXX";
  if (!::mkdtemp(staging.data())) return sys_error("creating " + staging);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { remove_tree(dir); }
  } cleanup{staging};
  journal_incoming();
  IncomingPart part(w, cfg, staging);
  Frame f = first;
  for (;;) {
    switch (f.type) {
      case migrate::kJobBegin:
      case migrate::kJobFile:
      case migrate::kJobEnd:
        CKPT_TRY(part.on_job_frame(f));
        break;
      case migrate::kCommit:
        CKPT_TRY(part.on_commit(f));
        break;
      case migrate::kDone:
        if (!part.committed()) return make_error(EPROTO, "DONE before COMMIT");
        return {};
      case migrate::kError:
        part.ending();
        return make_error(ECANCELED,
                          "sender: " + std::string(reinterpret_cast<const char*>(f.data), f.len));
      default:
        return refuse(
            w, make_error(EPROTO, std::string("unexpected frame ") + migrate::frame_name(f.type)));
    }
    auto next = r.next();
    if (!next.ok()) {
      part.ending();
      return next.error().context("the sending agent");
    }
    f = *next;
  }
}

}  // namespace ckpt::nodes

namespace ckpt::nodes {

namespace {

// State and parent of `pid` from /proc.
bool stat_of(pid_t pid, char* state, long* ppid) {
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren != std::string::npos &&
         std::sscanf(text.c_str() + paren + 1, " %c %ld", state, ppid) == 2;
}

}  // namespace

Status serve_where(FrameWriter& w, const AgentConfig& cfg, const Message& req) {
  const pid_t pid = pid_t(req.a);
  if (pid <= 0) return fail(w, make_error(EINVAL, "no root PID given"));
  UniqueFd d(::open(cfg.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d.valid()) return fail(w, sys_error("opening " + cfg.dir));
  // A migration still in progress here may yet start the part (its source
  // committed) or drop it (it did not): wait for its outcome.
  const double deadline = now_seconds() + cfg.timeout;
  while (::flock(d.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return fail(w, sys_error("locking " + cfg.dir));
    if (now_seconds() > deadline)
      return fail(w, make_error(ETIMEDOUT, "a migration to this node is still in progress"));
    ::usleep(20000);
  }
  // A part restored here is a child of the daemon (our parent) once its
  // session ended. The session's lock goes before its children are handed
  // over (it still has to return and exit, which under load can take long
  // enough for a wrong "not here"), so a part whose parent
  // is one of our sessions, running or exiting, is waited for.
  for (;;) {
    char state = 0;
    long ppid = 0;
    if (!stat_of(pid, &state, &ppid) || state == 'Z' || state == 'X') break;
    if (ppid == long(::getppid())) return send_step(w, {kRunning, uint64_t(pid), 0, {}});
    char pstate = 0;
    long pppid = 0;
    if (!stat_of(pid_t(ppid), &pstate, &pppid) || pppid != long(::getppid()))
      break;  // not a part of ours
    if (now_seconds() > deadline)
      return fail(w, make_error(ETIMEDOUT, "the session that restored PID " + std::to_string(pid) +
                                               " here has not ended"));
    ::usleep(20000);
  }
  return fail(w, make_error(ESRCH, "no part with root PID " + std::to_string(pid) + " runs here"));
}

}  // namespace ckpt::nodes
