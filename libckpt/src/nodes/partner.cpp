// The partner level's copies, both sides (partner.hpp).
#include "nodes/partner.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <ckpt/ckpt.hpp>
#include <filesystem>
#include <memory>

#include "image/generation_dir.hpp"
#include "image/job_image.hpp"
#include "image/store.hpp"
#include "migrate/job_stream.hpp"
#include "migrate/sender_link.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::nodes {

namespace fs = std::filesystem;
using migrate::Frame;
using migrate::FrameReader;
using migrate::FrameWriter;

namespace {

// The next step from `peer`, which must be `want`; FAILED is the peer's error.
Result<Message> expect_step(FrameReader& r, const std::string& peer, uint32_t want) {
  CKPT_ASSIGN(Message m, read_step(r, peer));
  if (m.step == kFailed) return make_error(EIO, peer + ": " + m.text);
  if (m.step != want)
    return make_error(
        EPROTO, peer + ": expected " + std::string(step_name(want)) + ", got " + step_name(m.step));
  return m;
}

// Generations 1..n of a chain directory, without a gap: n (0: none).
uint64_t complete_up_to(const std::string& chain_dir) {
  auto gens = image::list_generations(chain_dir);
  if (!gens.ok()) return 0;
  uint64_t n = 0;
  for (uint64_t g : *gens)
    if (g == n + 1) n = g;
  return n;
}

// Removes a directory tree, first renamed to a hidden name so that it is
// never seen half-deleted.
void remove_hidden(const std::string& dir) {
  const fs::path p(dir);
  const fs::path gone =
      p.parent_path() / (std::string(image::kRemovalPrefix) + p.filename().string() + "-" +
                         std::to_string(::getpid()));
  std::error_code ec;
  fs::rename(p, gone, ec);
  fs::remove_all(ec ? p : gone, ec);
}

struct Connection {
  std::unique_ptr<migrate::SenderLink> link;
  std::string peer;
};

// `extra`: more of the request's text after the part's name.
Result<Connection> connect_partner(const Partner& p, uint32_t step, uint64_t a, uint64_t b,
                                   const std::string& extra = {}) {
  if (!valid_part_name(p.part)) return make_error(EINVAL, "not a part name: " + p.part);
  CKPT_ASSIGN(std::vector<uint8_t> token, migrate::load_token(p.token_file));
  Connection c;
  c.peer = "partner " + p.addr;
  auto fd = migrate::connect_to(p.addr, p.timeout);
  if (!fd.ok()) return fd.error().context(c.peer);  // timeouts and peer watch set
  c.link = std::make_unique<migrate::SenderLink>(std::move(*fd));
  if (auto first = migrate::sender_handshake(c.link->w, c.link->r, token); !first.ok())
    return first.error().context(c.peer);
  if (auto s = send_step(c.link->w, {step, a, b, p.part + extra}); !s.ok())
    return s.error().context(c.peer);
  return c;
}

// ---- the agent's side ----

// FAILED while the sender may still be sending a generation: what it sends
// is read and dropped until it ends its stream (a few seconds at most), so
// that the connection is not reset under it before it reads the cause.
Status fail_mid_stream(FrameWriter& w, FrameReader& r, const Error& e) {
  (void)fail(w, e);
  const double until = now_seconds() + 5;
  while (now_seconds() < until) {
    auto f = r.next();
    if (!f.ok() || f->type == migrate::kJobEnd) break;
  }
  return e;
}

std::string part_dir(const AgentConfig& cfg, const std::string& part) {
  return cfg.dir + "/partners/" + part;
}

// The part's locks. Its directory's: shared while a chain is read (FETCH),
// exclusive while chains are removed (a STORE's pruning, DROP). Its
// `.store` file's: one STORE at a time. A generation being received is
// invisible until its rename, so a FETCH never waits for a STORE (whose
// sender may be a node that just died).
Result<UniqueFd> lock_file(const std::string& path, int how, bool directory) {
  UniqueFd fd(::open(path.c_str(),
                     directory ? O_RDONLY | O_DIRECTORY | O_CLOEXEC : O_RDWR | O_CREAT | O_CLOEXEC,
                     0600));
  if (!fd.valid()) return sys_error("opening " + path);
  while (::flock(fd.get(), how) != 0)
    if (errno != EINTR) return sys_error("locking " + path);
  return fd;
}
Result<UniqueFd> lock_part(const std::string& dir, int how) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ec.value(), "creating " + dir + ": " + ec.message());
  return lock_file(dir, how, true);
}

Held newest_held(const std::string& dir) {
  std::vector<uint64_t> chains = run_chains(dir);
  for (auto it = chains.rbegin(); it != chains.rend(); ++it)
    if (uint64_t n = complete_up_to(run_chain_dir(dir, *it)); n > 0) return {*it, n};
  return {};
}

// Keeps chain `newest` and the newest chain before it that holds a
// generation; removes the rest.
void prune_part(const std::string& dir, uint64_t newest) {
  bool kept_previous = false;
  std::vector<uint64_t> chains = run_chains(dir);
  for (auto it = chains.rbegin(); it != chains.rend(); ++it) {
    if (*it == newest) continue;
    if (*it < newest && !kept_previous && complete_up_to(run_chain_dir(dir, *it)) > 0) {
      kept_previous = true;
      continue;
    }
    remove_hidden(run_chain_dir(dir, *it));
  }
}

// What a killed session left in a chain: generations being received.
void remove_partial(const std::string& chain_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(chain_dir, ec))
    if (e.path().filename().string().rfind(".tmp-job-", 0) == 0) fs::remove_all(e.path(), ec);
}

Status serve_store(FrameWriter& w, FrameReader& r, const AgentConfig& cfg, const Message& req) {
  const uint64_t chain = req.a, want = req.b;
  if (chain == 0 || want == 0)
    return fail(w, make_error(EINVAL, "STORE of chain 0 or generation 0"));
  // "PART CHAIN-ID": a chain of the same number from an earlier life of
  // the job (before a restore from an older level) is not this one.
  const size_t space = req.text.find(' ');
  const std::string part = req.text.substr(0, space);
  const std::string id = space == std::string::npos ? "" : req.text.substr(space + 1);
  if (!valid_part_name(part) || id.size() != 32)
    return fail(w, make_error(EINVAL, "malformed STORE request: " + req.text));
  const std::string dir = part_dir(cfg, part);
  CKPT_ASSIGN(UniqueFd readers, lock_part(dir, LOCK_SH));  // the part is not dropped meanwhile
  CKPT_ASSIGN(UniqueFd storing, lock_file(dir + "/.store", LOCK_EX, false));
  const std::string cdir = run_chain_dir(dir, chain);
  if (Status s = image::ensure_dir(cdir); !s.ok()) return fail(w, s.error());
  remove_partial(cdir);
  uint64_t held = complete_up_to(cdir);
  std::array<uint8_t, 16> chain_id{};
  if (held > 0) {
    auto jm = image::read_job_or_root(image::generation_dir(cdir, held));
    if (jm.ok() && hex_id(jm->chain_id) == id) {
      chain_id = jm->chain_id;
    } else {  // a damaged copy or another chain: received again from its full
      remove_hidden(cdir);
      if (Status s = image::ensure_dir(cdir); !s.ok()) return fail(w, s.error());
      held = 0;
    }
  }
  migrate::JobIncoming in(cdir, held + 1);
  if (held > 0) in.continue_chain(held, chain_id);
  CKPT_TRY(send_step(w, {kHolding, chain, held, {}}));
  for (uint64_t g = held + 1; g <= want; ++g) {
    uint64_t done = 0;
    while (done == 0) {
      CKPT_ASSIGN(Frame f, r.next());
      // A generation that does not check out is removed unseen.
      if (Status s = in.on_frame(f, &done); !s.ok()) return fail_mid_stream(w, r, s.error());
    }
    if (Status s = image::fsync_dir(cdir); !s.ok()) return fail_mid_stream(w, r, s.error());
    if (g == 1) {  // once no FETCH reads the chains it removes
      ::flock(readers.get(), LOCK_EX);
      prune_part(dir, chain);
      ::flock(readers.get(), LOCK_SH);
    }
    if (cfg.log)
      cfg.log(LogKind::note, "partner copy of " + part + ": chain " + std::to_string(chain) +
                                 " generation " + std::to_string(g) + " stored");
    CKPT_TRY(send_step(w, {kStored, chain, g, {}}));
  }
  return {};
}

Status serve_fetch(FrameWriter& w, const AgentConfig& cfg, const Message& req) {
  const std::string dir = part_dir(cfg, req.text);
  CKPT_ASSIGN(UniqueFd lock, lock_part(dir, LOCK_SH));
  Held h = newest_held(dir);
  if (req.a != 0) h = {req.a, complete_up_to(run_chain_dir(dir, req.a))};
  if (h.generation == 0)
    return fail(w, make_error(ENOENT, "no copy of " + req.text +
                                          (req.a ? " chain " + std::to_string(req.a) : "") +
                                          " on this node"));
  CKPT_TRY(send_step(w, {kHolding, h.chain, h.generation, {}}));
  const std::string cdir = run_chain_dir(dir, h.chain);
  for (uint64_t g = 1; g <= h.generation; ++g)
    CKPT_TRY(migrate::send_job_generation(w, image::generation_dir(cdir, g), g));
  if (cfg.log)
    cfg.log(LogKind::note, "partner copy of " + req.text + ": chain " + std::to_string(h.chain) +
                               " (" + std::to_string(h.generation) + " generations) sent back");
  return {};
}

}  // namespace

bool valid_part_name(const std::string& part) {
  if (part.empty() || part.size() > 128 || part[0] == '.') return false;
  return std::all_of(part.begin(), part.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

Result<Held> partner_holds(const Partner& p) {
  CKPT_ASSIGN(Connection c, connect_partner(p, kQuery, 0, 0));
  CKPT_ASSIGN(Message m, expect_step(c.link->r, c.peer, kHolding));
  return Held{m.a, m.b};
}

Result<uint64_t> push_to_partner(const Partner& p, const std::string& chain_dir, uint64_t chain,
                                 uint64_t generation) {
  CKPT_ASSIGN(image::JobMeta jm,
              image::read_job_or_root(image::generation_dir(chain_dir, generation)));
  CKPT_ASSIGN(Connection c,
              connect_partner(p, kStore, chain, generation, " " + hex_id(jm.chain_id)));
  CKPT_ASSIGN(Message h, expect_step(c.link->r, c.peer, kHolding));
  const uint64_t before = c.link->w.bytes();
  for (uint64_t g = h.b + 1; g <= generation; ++g) {
    if (Status s = migrate::send_job_generation(c.link->w, image::generation_dir(chain_dir, g), g);
        !s.ok()) {
      // The partner's own cause (its store is full...) when it sent one.
      auto m = read_step(c.link->r, c.peer);
      if (m.ok() && m->step == kFailed) return make_error(EIO, c.peer + ": " + m->text);
      return s.error().context(c.peer);
    }
    CKPT_ASSIGN(Message s, expect_step(c.link->r, c.peer, kStored));
    if (s.a != chain || s.b != g)
      return make_error(EPROTO, c.peer + ": stored chain " + std::to_string(s.a) + " generation " +
                                    std::to_string(s.b) + " where " + std::to_string(g) +
                                    " was sent");
  }
  return c.link->w.bytes() - before;
}

Result<Held> fetch_from_partner(const Partner& p, uint64_t chain, const std::string& chain_dir) {
  CKPT_ASSIGN(Connection c, connect_partner(p, kFetch, chain, 0));
  CKPT_ASSIGN(Message h, expect_step(c.link->r, c.peer, kHolding));
  const fs::path target(chain_dir);
  std::error_code made;
  fs::create_directories(target.parent_path(), made);
  if (made)
    return make_error(made.value(),
                      "creating " + target.parent_path().string() + ": " + made.message());
  std::string staging =
      (target.parent_path() / (".fetching-" + target.filename().string() + "-XXXXXX")).string();
  if (!::mkdtemp(staging.data())) return sys_error("creating " + staging);
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      if (!dir.empty()) remove_hidden(dir);
    }
  } cleanup{staging};
  {
    migrate::JobIncoming in(staging, 1);
    for (uint64_t g = 1; g <= h.b; ++g) {
      uint64_t done = 0;
      while (done == 0) {
        CKPT_ASSIGN(Frame f, c.link->r.next());
        if (f.type == migrate::kNodeStep) {
          CKPT_ASSIGN(Message m, parse_step(f, c.peer));
          return make_error(EIO, c.peer + ": " + m.text);
        }
        if (Status s = in.on_frame(f, &done); !s.ok()) return s.error().context(c.peer);
      }
    }
  }
  if (Status s = image::fsync_dir(staging); !s.ok()) return s.error();
  std::error_code ec;
  if (fs::exists(target, ec)) remove_hidden(chain_dir);
  if (::rename(staging.c_str(), chain_dir.c_str()) != 0)
    return sys_error("renaming " + staging + " to " + chain_dir);
  cleanup.dir.clear();
  if (Status s = image::fsync_dir(target.parent_path().string()); !s.ok()) return s.error();
  return Held{h.a, h.b};
}

Status drop_at_partner(const Partner& p) {
  CKPT_ASSIGN(Connection c, connect_partner(p, kDrop, 0, 0));
  CKPT_ASSIGN(Message m, expect_step(c.link->r, c.peer, kHolding));
  (void)m;
  return {};
}

bool is_partner_request(uint32_t step) {
  return step == kStore || step == kFetch || step == kQuery || step == kDrop;
}

Status serve_partner(FrameWriter& w, FrameReader& r, const AgentConfig& cfg, const Message& req) {
  if (req.step == kStore) return serve_store(w, r, cfg, req);
  if (!valid_part_name(req.text))
    return fail(w, make_error(EINVAL, "not a part name: " + req.text));
  if (req.step == kFetch) return serve_fetch(w, cfg, req);
  if (req.step == kDrop) {
    const std::string dir = part_dir(cfg, req.text);
    {
      CKPT_ASSIGN(UniqueFd lock, lock_part(dir, LOCK_EX));
      remove_hidden(dir);
    }
    if (cfg.log) cfg.log(LogKind::note, "partner copies of " + req.text + " dropped");
    return send_step(w, {kHolding, 0, 0, {}});
  }
  const Held h = newest_held(part_dir(cfg, req.text));
  return send_step(w, {kHolding, h.chain, h.generation, {}});
}

}  // namespace ckpt::nodes
