// The monitor of one migration (monitor.hpp).
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ckpt/migrate.hpp>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <optional>
#include <tuple>

#include "image/chain.hpp"
#include "image/format.hpp"
#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "migrate/control.hpp"
#include "migrate/gate.hpp"
#include "migrate/handover.hpp"
#include "migrate/job_stream.hpp"
#include "migrate/monitor.hpp"
#include "migrate/protocol.hpp"
#include "migrate/sandbox.hpp"
#include "migrate/staging.hpp"
#include "migrate/stream_handler.hpp"
#include "migrate/warm_restore.hpp"
#include "restore/restore_held.hpp"
#include "util/clock.hpp"

namespace ckpt::migrate {

namespace {

// The monitor's part of metadata first: kLayout builds the process from the
// layout, kRuns writes the runs that landed. Nothing to do once the warm
// restore was given up (the stream goes on; the restore will be cold).
Status early_step(WarmRestore& warm, const std::string& staging, Ctl kind, const std::string& msg,
                  bool warm_ok) {
  if (!warm_ok) return {};
  if (msg.size() < 8 || (kind == Ctl::kRuns && (msg.size() - 8) % 24))
    return make_error(EBADMSG, "malformed message from the connection handler");
  const auto* p = reinterpret_cast<const uint8_t*>(msg.data());
  const uint64_t gen = get_u64(p);
  if (kind == Ctl::kLayout) return warm.begin_layout(gen, staging + "/.tmp-" + std::to_string(gen));
  std::vector<LandedRun> runs((msg.size() - 8) / 24);
  for (size_t i = 0; i < runs.size(); ++i) {
    const uint8_t* q = p + 8 + 24 * i;
    runs[i] = {get_u64(q), get_u64(q + 8), get_u64(q + 16)};
  }
  return warm.write_landed(runs);
}

Status fsync_path(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) return sys_error("fsync " + path);
  return {};
}

// A job's generation: job.img and every other member's files and directory.
Status fsync_job_members(const std::string& gen_dir) {
  auto jm = image::read_job_or_root(gen_dir);
  if (!jm.ok() || jm->members.size() < 2) return {};
  CKPT_TRY(fsync_path(gen_dir + "/" + image::kJobFile));
  const pid_t root = jm->members[0].pid;
  for (const image::JobMember& m : jm->members) {
    if (m.zombie() || m.pid == root) continue;
    const std::string d = image::member_dir(gen_dir, m.pid, root);
    for (const char* f : {image::kPagesFile, image::kAddrFile, image::kMetaFile})
      CKPT_TRY(fsync_path(d + "/" + f));
    CKPT_TRY(image::fsync_dir(d));
  }
  return {};
}

// Makes the received chain durable and moves it into `dir`; the new full
// supersedes what was there before (as after cr_full).
Status keep_chain(const std::string& staging, const std::string& dir) {
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(staging));
  if (gens.empty()) return make_error(ENOENT, "nothing received");
  CKPT_ASSIGN(image::Chain chain, image::open_chain(staging, gens.back()));
  for (const auto& link : chain.links) CKPT_TRY(link->verify_all());
  for (uint64_t g : gens) {
    std::string from = image::generation_dir(staging, g);
    for (const char* f : {image::kPagesFile, image::kAddrFile, image::kMetaFile})
      CKPT_TRY(fsync_path(from + "/" + f));
    CKPT_TRY(fsync_job_members(from));
    CKPT_TRY(image::fsync_dir(from));
    std::string to = image::generation_dir(dir, g);
    if (::rename(from.c_str(), to.c_str()) != 0) return sys_error("moving the chain into " + to);
  }
  CKPT_TRY(image::fsync_dir(dir));
  image::remove_generations_before(dir, gens.front());
  return {};
}

// The monitor's side of one migration: the connection handler forked
// (sandboxed: it reads the stream into staging), each committed generation
// applied to a process built while the next arrives (warm restore), the
// process restored from staging once the stream is complete (warm, or cold
// from the whole chain), and handed over: held ready, let go, the handler
// told so (docs/security.md, "A receiver killed after COMMIT").
class Monitor {
 public:
  Monitor(const ReceiveOptions& opts, int listen_fd, AuthenticatedConnection authed)
      : opts_(opts), listen_fd_(listen_fd), authed_(std::move(authed)) {
    out_.peer = authed_.peer;
  }
  Result<ReceivedProcess> run();

 private:
  Status start_handler(uint64_t first_gen);
  // Applies generations until the handler says the stream is complete:
  // that generation, or the error that ended the stream.
  Result<uint64_t> apply_generations(WarmRestore& warm);
  Result<RestoreStats> restore(WarmRestore& warm, uint64_t final_gen);
  // kHeld to the handler: the process is ready and held (its leader's
  // status and stat go along, for the handler to read if this one dies).
  void announce(pid_t pid);
  Result<ReceivedProcess> hand_over(const RestoreStats& restored, double t_restore);
  // Waits for the handler; what it died of, for a message.
  std::string reap();
  template <class... A>
  void say(const char* fmt, A... args) const;

  const ReceiveOptions& opts_;
  const int listen_fd_;
  AuthenticatedConnection authed_;
  const double t0_ = now_seconds();
  ReceivedProcess out_;
  std::optional<Staging> staged_;
  UniqueFd ctl_;
  pid_t handler_ = -1;
  bool warm_ok_ = false, handed_ = false;
};

template <class... A>
void Monitor::say(const char* fmt, A... args) const {
  if (!opts_.log) return;
  char line[512];
  std::snprintf(line, sizeof line, fmt, args...);
  opts_.log(LogKind::trace, line);
}

Result<ReceivedProcess> Monitor::run() {
  set_timeouts(authed_.conn.get(), opts_.timeout_seconds);
  uint64_t first_gen = 1;
  if (!opts_.dir.empty()) {
    CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(opts_.dir));
    if (!gens.empty()) first_gen = gens.back() + 1;
  }
  CKPT_ASSIGN(staged_, make_staging(opts_.dir, std::to_string(::getpid()) + "-" +
                                                   std::to_string(authed_.conn.get())));
  struct Cleanup {
    const Staging& s;
    ~Cleanup() { remove_staging(s); }
  } cleanup{*staged_};
  CKPT_TRY(start_handler(first_gen));
  WarmRestore warm(staged_->dir, opts_.new_pid);
  warm_ok_ = opts_.warm;
  CKPT_ASSIGN(uint64_t final_gen, apply_generations(warm));
  const double tr = now_seconds();
  auto restored = restore(warm, final_gen);
  if (!restored.ok()) {
    const std::string& m = restored.error().message;
    (void)ctl_send(ctl_.get(), Ctl::kError, m.data(), m.size());
    reap();
    return restored.error().context(out_.peer + ": restore failed");
  }
  return hand_over(*restored, tr);
}

Status Monitor::start_handler(uint64_t first_gen) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return sys_error("socketpair");
  ctl_.reset(sv[0]);
  UniqueFd child_end(sv[1]);
  handler_ = ::fork();
  if (handler_ < 0) return sys_error("fork");
  if (handler_ > 0) return {};
  const int conn = authed_.conn.get();
  ::close(listen_fd_);
  ctl_.reset();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // Connections waiting at the gate are the parent's to close.
  close_fds_except(conn, child_end.get());
  Status st = opts_.sandbox ? apply_receiver_sandbox(staged_->dir) : Status{};
  uint64_t bytes = 0;
  if (st.ok()) {
    st = receive_stream(conn, child_end.get(), staged_->dir, authed_.proof, first_gen, &bytes);
  }
  if (!st.ok()) {
    (void)ctl_send(child_end.get(), Ctl::kError, st.error().message.data(),
                   st.error().message.size());
    ::_exit(1);
  }
  (void)ctl_send_u64(child_end.get(), Ctl::kDone, bytes);
  ::_exit(0);
}

Result<uint64_t> Monitor::apply_generations(WarmRestore& warm) {
  FrameWriter acks(authed_.conn.get());
  double early_seconds = 0;
  CtlMessage m;
  for (;;) {
    m = ctl_recv(ctl_.get());
    if (m.kind == Ctl::kLayout || m.kind == Ctl::kRuns) {  // build while the content arrives
      const double ta = now_seconds();
      Status st = early_step(warm, staged_->dir, m.kind, m.data, warm_ok_);
      early_seconds += now_seconds() - ta;
      if (!st.ok()) {
        say("building while receiving: %s", st.error().message.c_str());
        warm_ok_ = false;
        warm.abort();
      }
      continue;
    }
    uint64_t g;
    if ((m.kind != Ctl::kCommitted && m.kind != Ctl::kJobCommitted) || !m.u64(&g)) break;
    const double ta = now_seconds();
    // A job's generations are restored at the end (restore/job_spawn), not warm.
    if (m.kind == Ctl::kJobCommitted) warm_ok_ = false;
    Status added = warm_ok_ ? warm.add(g) : Status{};
    say("generation %llu applied in %.1f ms (%.1f ms while it arrived)%s%s", (unsigned long long)g,
        (now_seconds() - ta) * 1e3, early_seconds * 1e3, added.ok() ? "" : ": ",
        added.ok() ? "" : added.error().message.c_str());
    early_seconds = 0;
    if (!added.ok()) {
      warm_ok_ = false;
      warm.abort();
    }
    // The sender waits for this before its final stop (best effort: a lost
    // connection shows up in the handler's report).
    uint8_t gb[8];
    for (int i = 0; i < 8; ++i) gb[i] = uint8_t(g >> (8 * i));
    (void)acks.send(kApplied, gb, sizeof gb);
  }
  uint64_t final_gen;
  if (m.kind == Ctl::kComplete && m.u64(&final_gen)) return final_gen;
  std::string why = m.kind == Ctl::kError ? m.data : reap();
  if (m.kind == Ctl::kError) reap();
  return make_error(EIO, out_.peer + ": " + why + "; nothing restored");
}

// Warm where every generation was applied; else (or if the warm finish
// fails before the process was announced) cold, from the whole chain.
Result<RestoreStats> Monitor::restore(WarmRestore& warm, uint64_t final_gen) {
  auto announce = [this](pid_t pid) { this->announce(pid); };
  Result<RestoreStats> restored = make_error(EINVAL, "not restored");
  if (warm_ok_ && warm.last() == final_gen) {
    const double tr = now_seconds();
    out_.build = warm.built_early() ? "while-arriving" : "warm";
    restored = warm.finish(announce);
    say("warm finish in %.1f ms%s%s", (now_seconds() - tr) * 1e3, restored.ok() ? "" : ": ",
        restored.ok() ? "" : restored.error().message.c_str());
    if (!restored.ok()) warm.abort();
  }
  if (!restored.ok() && !handed_) {
    out_.build = "cold";
    RestoreOptions ro;
    ro.dir = staged_->dir;
    ro.log = opts_.log;
    ro.new_pid = opts_.new_pid;
    restored = restore::restore_held(ro, nullptr, announce);
  }
  return restored;
}

void Monitor::announce(pid_t pid) {
  auto held = open_held(pid);
  std::vector<uint8_t> b;
  put_u32(b, uint32_t(pid));
  handed_ = true;
  if (held.ok())
    (void)ctl_send(ctl_.get(), Ctl::kHeld, b.data(), b.size(),
                   {held->status.get(), held->stat.get()});
  else
    (void)ctl_send(ctl_.get(), Ctl::kHeld, b.data(), b.size());
}

// The process runs: the handler hears so (kRunning) and sends RUNNING, on
// which the sender ends its source. A monitor that dies on the way leaves
// the handler to read the outcome from the kernel: one copy either way.
Result<ReceivedProcess> Monitor::hand_over(const RestoreStats& restored, double t_restore) {
  out_.restore_seconds = now_seconds() - t_restore;
  out_.pid = restored.pid;
  out_.generations = restored.generations_read;
  std::vector<uint8_t> pidb;
  put_u32(pidb, uint32_t(restored.pid));
  (void)ctl_send(ctl_.get(), Ctl::kRunning, pidb.data(), pidb.size());
  out_.seconds = now_seconds() - t0_;
  CtlMessage done = ctl_recv(ctl_.get());
  // A handler that died may not have said RUNNING: say it (twice is
  // harmless, the sender reads the first).
  if (done.kind == Ctl::kNone) {
    FrameWriter acks(authed_.conn.get());
    (void)acks.send(kRunning, pidb.data(), pidb.size());
  }
  if (done.kind != Ctl::kDone) {
    std::string why = done.kind == Ctl::kError ? done.data : reap();
    if (done.kind == Ctl::kError) reap();
    // The process runs here; say so along with the problem.
    return make_error(
        EIO, out_.peer + ": process restored as PID " + std::to_string(out_.pid) + ", but: " + why);
  }
  reap();
  (void)done.u64(&out_.bytes);
  if (!opts_.dir.empty())
    if (Status k = keep_chain(staged_->dir, opts_.dir); !k.ok())
      out_.warning = "the received chain was not kept in " + opts_.dir + ": " + k.error().message;
  return out_;
}

std::string Monitor::reap() {
  int ws = 0;
  while (::waitpid(handler_, &ws, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGSYS)
    return "the connection handler made a system call outside its seccomp allowlist";
  if (WIFSIGNALED(ws))
    return "the connection handler died (signal " + std::to_string(WTERMSIG(ws)) + ")";
  return "the connection handler ended without a report";
}

}  // namespace

Result<ReceivedProcess> serve_connection(const ReceiveOptions& opts, int listen_fd,
                                         AuthenticatedConnection authed) {
  return Monitor(opts, listen_fd, std::move(authed)).run();
}

}  // namespace ckpt::migrate
