// One cr_noded session (agent.hpp).
#include "nodes/agent.hpp"

#include <ckpt/ckpt.hpp>

#include "image/store.hpp"
#include "job/round_hooks.hpp"
#include "migrate/handshake.hpp"
#include "nodes/move.hpp"
#include "nodes/partner.hpp"
#include "nodes/wire.hpp"
#include "restore/restore_held.hpp"
#include "util/clock.hpp"

namespace ckpt::nodes {

namespace {

using migrate::FrameReader;
using migrate::FrameWriter;

Status checkpoint(FrameWriter& w, FrameReader& r, const AgentConfig& cfg, const Message& req) {
  CheckpointOptions o;
  o.dir = cfg.dir;
  o.pid = pid_t(req.a);
  o.tree = true;
  o.tcp_established = true;  // connections to the other nodes' parts
  o.log = cfg.log;
  if (o.pid <= 0) return fail(w, make_error(EINVAL, "no root PID given"));
  job::RoundHooks hooks;
  hooks.frozen = [&] { return report_and_wait(w, r, {kFrozen}); };
  hooks.captured = [&] { return report_and_wait(w, r, {kCaptured}); };
  hooks.written = [&] { return report_and_wait(w, r, {kWritten}); };
  auto res = job::hooked_round(o, req.b == 1, hooks);
  if (!res.ok()) return fail(w, res.error());
  return send_step(w, {kCommitted, res->generation, uint64_t(res->frozen_seconds * 1e6),
                       std::to_string(res->processes)});
}

Status restore(FrameWriter& w, FrameReader& r, const AgentConfig& cfg, const Message& req) {
  RestoreOptions o;
  o.dir = cfg.dir;
  o.generation = req.a;
  o.log = cfg.log;
  if (o.generation == 0) {
    auto gens = image::list_generations(cfg.dir);
    if (!gens.ok() || gens->empty())
      return fail(w, make_error(ENOENT, "no checkpoint in " + cfg.dir));
    o.generation = gens->back();
  }
  const uint64_t gen = o.generation;
  auto res = restore::restore_held(o, [&](pid_t root) {
    return report_and_wait(w, r, {kReady, gen, uint64_t(root)});
  });
  if (!res.ok()) return fail(w, res.error());
  return send_step(w, {kRunning, uint64_t(res->pid), 0, {}});
}

}  // namespace

Status serve_session(int fd, const AgentConfig& cfg) {
  CKPT_ASSIGN(migrate::Mac proof, migrate::accept_sender(fd, cfg.token, now_seconds() + 10));
  migrate::set_timeouts(fd, cfg.timeout);
  migrate::watch_peer(fd);  // a cr_job or a sending agent whose node or link died
  FrameWriter w(fd);
  FrameReader r(fd);
  std::vector<uint8_t> ok(proof.begin(), proof.end());
  migrate::put_u64(ok, 1);
  CKPT_TRY(w.send(migrate::kAuthOk, ok.data(), ok.size()));
  CKPT_ASSIGN(migrate::Frame first, r.next());
  if (first.type == migrate::kJobBegin) return serve_incoming(w, r, cfg, first);  // another agent
  CKPT_ASSIGN(Message req, parse_step(first, "cr_job"));
  if (is_partner_request(req.step)) return serve_partner(w, r, cfg, req);
  if (req.step == kMigrate) return serve_migrate(w, r, cfg, req);
  if (req.step == kWhere) return serve_where(w, cfg, req);
  if (req.step == kCheckpoint) return checkpoint(w, r, cfg, req);
  if (req.step == kRestore) return restore(w, r, cfg, req);
  return fail(w, make_error(EPROTO, std::string("unexpected request ") + step_name(req.step)));
}

}  // namespace ckpt::nodes
