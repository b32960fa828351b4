// cr_migrate: the sending side. Every generation is written by the
// checkpoint code (dump/generation) into a writer whose output is the
// connection, so memory goes from process_vm_readv to the socket without a
// file in between.
#include <netdb.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <ckpt/migrate.hpp>
#include <cstdlib>
#include <cstring>

#include "dump/generation.hpp"
#include "dump/precopy_rule.hpp"
#include "image/format.hpp"
#include "migrate/protocol.hpp"
#include "migrate/sender_link.hpp"
#include "migrate/witness.hpp"
#include "proc/freeze.hpp"
#include "util/clock.hpp"

namespace ckpt {

namespace migrate {

namespace {

class WireStream : public image::GenerationStream {
 public:
  // `runs_first`: each batch of content frames follows a GEN_RUNS frame
  // with their addresses (metadata first, docs/migration.md).
  WireStream(FrameWriter& w, bool runs_first) : w_(w), runs_first_(runs_first) {}
  Status content(const iovec* iov, const uint64_t* hashes, const uint64_t* vaddrs,
                 size_t n) override {
    if (!runs_first_) return w_.send_content(iov, hashes, n);
    constexpr size_t kMaxRuns = 4096;  // max_payload(kGenRuns)
    for (size_t i = 0; i < n; i += kMaxRuns) {
      const size_t k = std::min(kMaxRuns, n - i);
      std::vector<uint8_t> p;
      p.reserve(16 * k);
      for (size_t j = i; j < i + k; ++j) {
        put_u64(p, vaddrs[j]);
        put_u64(p, iov[j].iov_len);
      }
      CKPT_TRY(w_.send(kGenRuns, p.data(), p.size()));
      CKPT_TRY(w_.send_content(iov + i, hashes + i, k));
    }
    return {};
  }
  Status commit(const std::vector<uint8_t>& ph, const std::vector<uint8_t>& addr,
                const std::vector<uint8_t>& meta) override {
    std::vector<uint8_t> p;
    p.reserve(24 + ph.size() + addr.size() + meta.size());
    for (const auto* v : {&ph, &addr, &meta}) {
      put_u64(p, v->size());
      p.insert(p.end(), v->begin(), v->end());
    }
    return w_.send(kGenFiles, p.data(), p.size());
  }

 private:
  FrameWriter& w_;
  bool runs_first_;
};

// A frozen migration sends its layout before its memory, so that the
// receiver builds the process while the content arrives.
bool layout_first(const MigrateOptions& opts, const SenderLink& link) {
  return !opts.live && (link.features & kFeatureLayoutFirst);
}

}  // namespace

Result<UniqueFd> connect_to(const std::string& to, double timeout) {
  std::string host, port;
  CKPT_TRY(split_host_port(to, &host, &port));
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return make_error(EINVAL, "resolving " + to + ": " + gai_strerror(rc));
  Error last = make_error(ECONNREFUSED, "connecting to " + to + ": no address");
  for (addrinfo* a = res; a; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) continue;
    set_timeouts(fd.get(), timeout);
    watch_peer(fd.get());
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      return fd;
    }
    last = sys_error("connecting to " + to);
  }
  ::freeaddrinfo(res);
  return last;
}

Result<uint64_t> sender_handshake(FrameWriter& w, FrameReader& r, const std::vector<uint8_t>& token,
                                  uint32_t* features) {
  uint8_t mine[kNonceSize];
  if (::getrandom(mine, sizeof mine, 0) != ssize_t(sizeof mine)) return sys_error("getrandom");
  std::vector<uint8_t> hello;
  put_u32(hello, kProtocolVersion);
  put_u32(hello, 0);
  hello.insert(hello.end(), mine, mine + kNonceSize);
  CKPT_TRY(w.send(kHello, hello.data(), hello.size()));
  CKPT_ASSIGN(Frame ch, expect(r, kChallenge, "receiver"));
  if (ch.len != 8 + kNonceSize) return make_error(EBADMSG, "malformed CHALLENGE frame");
  if (get_u32(ch.data) != kProtocolVersion)
    return make_error(EPROTO,
                      "receiver speaks protocol version " + std::to_string(get_u32(ch.data)));
  if (features) *features = get_u32(ch.data + 4);
  uint8_t theirs[kNonceSize];
  std::memcpy(theirs, ch.data + 8, kNonceSize);
  CKPT_ASSIGN(Mac mac, hmac(token, "ckpt-migrate-v1 sender", theirs, mine));
  CKPT_TRY(w.send(kAuth, mac.data(), mac.size()));
  CKPT_ASSIGN(Frame ok, expect(r, kAuthOk, "receiver"));
  if (ok.len != kMacSize + 8) return make_error(EBADMSG, "malformed AUTH_OK frame");
  CKPT_ASSIGN(Mac want, hmac(token, "ckpt-migrate-v1 receiver", mine, theirs));
  if (!mac_equal(ok.data, want.data()))
    return make_error(EACCES, "the receiver does not know the token (authentication failed)");
  uint64_t first = get_u64(ok.data + kMacSize);
  if (first == 0) return make_error(EBADMSG, "receiver asked for generation 0");
  return first;
}

Result<std::unique_ptr<SenderLink>> open_link(const MigrateOptions& opts) {
  CKPT_ASSIGN(std::vector<uint8_t> token, load_token(opts.token_file));
  CKPT_ASSIGN(UniqueFd fd, connect_to(opts.to, opts.timeout_seconds));
  auto link = std::make_unique<SenderLink>(std::move(fd));
  CKPT_ASSIGN(link->first_gen, sender_handshake(link->w, link->r, token, &link->features));
  return link;
}

}  // namespace migrate

namespace {
using namespace migrate;
}  // namespace

namespace {

// One process moved to a receiver: a generation per round written onto the
// stream (dump::write_generation), pre-copy rounds while it runs (live)
// until the stop rule picks the final one, which stays frozen, commits and
// is handed over: the source dies with this tool from then on, and a death
// before the receiver said RUNNING is the witness's to finish
// (migrate/witness.hpp).
class ProcessSender {
 public:
  ProcessSender(const MigrateOptions& opts, double t0, std::unique_ptr<SenderLink> link,
                std::unique_ptr<CommitWitness> witness)
      : opts_(opts), t0_(t0), link_(std::move(link)), witness_(std::move(witness)) {
    stats_.live = opts.live;
  }
  Result<MigrateStats> run();

 private:
  // Writes generation `round`; false once the final one was handed over.
  Result<bool> round(int round);
  // The receiver acknowledges each generation once its process holds it.
  // Each pre-copy round starts (the process running) only when the receiver
  // has caught up, so the final stop never waits for its backlog and what
  // the process dirtied meanwhile is sent by pre-copy, not in the downtime.
  Status read_acks();
  // GEN_BEGIN (and, for a frozen full, its layout first) and the writer
  // that streams the generation's content.
  Result<std::unique_ptr<image::SnapshotWriter>> open_generation(const image::ImageMeta& m,
                                                                 bool full);
  bool decide_final(int round, uint64_t bytes);
  // The final round, committed and still frozen: COMMIT, then RUNNING from
  // the receiver, with the source bound to die with this tool meanwhile.
  Status hand_over(uint64_t generation);

  const MigrateOptions& opts_;
  const double t0_;  // the migration's start (connect included)
  std::unique_ptr<SenderLink> link_;
  std::unique_ptr<CommitWitness> witness_;
  MigrateStats stats_;
  dump::GenerationOut last_;
  bool have_last_ = false;
  uint64_t applied_ = 0, sent_gen_ = 0;
  double t_sent_ = 0, t_running_ = 0;
};

Result<MigrateStats> ProcessSender::run() {
  for (int r = 1;; ++r) {
    CKPT_ASSIGN(bool more, round(r));
    if (!more) break;
  }
  (void)link_->w.send(kDone, nullptr, 0);
  if (!opts_.live) stats_.stop_reason = "frozen";
  stats_.bytes_total = link_->w.bytes();
  stats_.migration_seconds = now_seconds() - t0_;
  return stats_;
}

Result<bool> ProcessSender::round(int round) {
  CKPT_TRY(read_acks());
  CheckpointOptions co;
  co.pid = opts_.pid;
  co.tracker = opts_.tracker;
  co.progress = opts_.progress;
  dump::GenerationSpec spec;
  spec.generation = link_->first_gen + uint64_t(round) - 1;
  spec.prev = have_last_ ? &last_.meta : nullptr;
  spec.prev_hashes = have_last_ ? &last_.page_hashes : nullptr;
  spec.prev_digest = have_last_ ? last_.meta_digest : 0;
  spec.open = [this, full = !have_last_](const image::ImageMeta& m) {
    return open_generation(m, full);
  };
  spec.decide_final = [this, round](uint64_t bytes) { return decide_final(round, bytes); };
  spec.before_kill = [this, gen = spec.generation]() { return hand_over(gen); };
  t_sent_ = 0;
  const double tr = now_seconds();
  const uint64_t sent = link_->w.bytes();
  dump::GenerationOut out;
  auto res = dump::write_generation(co, spec, &out);
  if (!res.ok()) {
    // Tell the receiver why (best effort); the source was released untouched.
    std::string msg = res.error().message;
    (void)link_->w.send(kError, msg.data(), std::min<size_t>(msg.size(), 4000));
    return res.error();
  }
  stats_.tracker = res->tracker;
  MigrateRound mr;
  mr.generation = spec.generation;
  mr.dirty_bytes = out.plan_bytes;
  mr.bytes = link_->w.bytes() - sent;
  mr.seconds = now_seconds() - tr;
  mr.send_seconds = t_sent_ ? t_sent_ - tr : mr.seconds;
  mr.frozen_seconds = res->frozen_seconds;
  stats_.rounds.push_back(mr);
  if (out.final) {
    stats_.downtime_seconds = t_running_ - out.t_frozen;
    return false;
  }
  sent_gen_ = spec.generation;
  last_ = std::move(out);
  have_last_ = true;
  return true;
}

Status ProcessSender::read_acks() {
  while (applied_ < sent_gen_) {
    CKPT_ASSIGN(Frame f, expect(link_->r, kApplied, "receiver"));
    if (f.len != 8) return make_error(EBADMSG, "malformed APPLIED frame");
    applied_ = std::max(applied_, get_u64(f.data));
  }
  return {};
}

Result<std::unique_ptr<image::SnapshotWriter>> ProcessSender::open_generation(
    const image::ImageMeta& m, bool full) {
  FrameWriter& w = link_->w;
  std::vector<uint8_t> p;
  put_u64(p, m.generation);
  put_u64(p, m.parent_generation);
  p.insert(p.end(), m.chain_id.begin(), m.chain_id.end());
  CKPT_TRY(w.send(kGenBegin, p.data(), p.size()));
  // Only a full whose process stays frozen keeps the layout it starts with.
  const bool early = layout_first(opts_, *link_) && full;
  if (early) {
    uint64_t nrec = 0;
    std::vector<uint8_t> records = image::encode_meta(m, &nrec);
    std::vector<uint8_t> lp;
    put_u64(lp, nrec);
    lp.insert(lp.end(), records.begin(), records.end());
    CKPT_TRY(w.send(kGenLayout, lp.data(), lp.size()));
  }
  return image::SnapshotWriter::create_stream(m.generation, m.chain_id,
                                              std::make_unique<WireStream>(w, early));
}

bool ProcessSender::decide_final(int round, uint64_t bytes) {
  if (!opts_.live) return true;
  const char* why =
      dump::precopy_stop(precopy_limits(opts_), round, bytes,
                         round > 1 ? stats_.rounds.back().dirty_bytes : 0, now_seconds() - t0_);
  if (why) stats_.stop_reason = why;
  return why != nullptr;
}

// From EXITKILL on, the source dies with this process; COMMIT comes after
// it, and a death in between is the witness's to finish. A refusal by the
// receiver still releases the source: the witness is disarmed first, and
// the detach clears EXITKILL.
Status ProcessSender::hand_over(uint64_t generation) {
  t_sent_ = now_seconds();
  std::vector<uint8_t> p;
  put_u64(p, generation);
  CKPT_ASSIGN(std::vector<pid_t> tids, proc::task_ids(opts_.pid));
  CKPT_TRY(witness_->arm(generation, {opts_.pid}));
  Result<pid_t> running = [&]() -> Result<pid_t> {
    CKPT_TRY(proc::die_with_tracer(tids));
    CKPT_TRY(link_->w.send(kCommit, p.data(), p.size()));
    witness_->committed();
    Frame f;
    do {  // acknowledgments of earlier generations may come first
      CKPT_ASSIGN(f, link_->r.next());
      if (f.type == kApplied && f.len == 8) applied_ = std::max(applied_, get_u64(f.data));
    } while (f.type == kApplied);
    if (f.type != kRunning || f.len != 4) return unexpected_frame(f, kRunning, "receiver");
    return pid_t(get_u32(f.data));
  }();
  if (!running.ok()) {
    witness_->disarm();
    return running.error();
  }
  stats_.remote_pid = *running;
  t_running_ = now_seconds();
  return {};
}

}  // namespace

Result<MigrateStats> migrate_process(const MigrateOptions& opts) {
  if (opts.tree) return migrate_job(opts);
  if (opts.tcp_established)
    return make_error(EINVAL, "--tcp-established moves a job (--tree) only");
  const double t0 = now_seconds();
  CKPT_ASSIGN(auto link, open_link(opts));
  CKPT_ASSIGN(auto witness, CommitWitness::start(link->fd.get()));
  return ProcessSender(opts, t0, std::move(link), std::move(witness)).run();
}

}  // namespace ckpt
