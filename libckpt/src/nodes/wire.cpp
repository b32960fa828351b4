// NODE_STEP frames (wire.hpp).
#include "nodes/wire.hpp"

namespace ckpt::nodes {

const char* step_name(uint32_t s) {
  switch (s) {
    case kCheckpoint:
      return "CHECKPOINT";
    case kGo:
      return "GO";
    case kAbort:
      return "ABORT";
    case kRestore:
      return "RESTORE";
    case kFrozen:
      return "FROZEN";
    case kCaptured:
      return "CAPTURED";
    case kWritten:
      return "WRITTEN";
    case kCommitted:
      return "COMMITTED";
    case kReady:
      return "READY";
    case kRunning:
      return "RUNNING";
    case kFailed:
      return "FAILED";
    case kMigrate:
      return "MIGRATE";
    case kWhere:
      return "WHERE";
    case kSent:
      return "SENT";
    case kMoved:
      return "MOVED";
    case kStore:
      return "STORE";
    case kFetch:
      return "FETCH";
    case kQuery:
      return "QUERY";
    case kDrop:
      return "DROP";
    case kHolding:
      return "HOLDING";
    case kStored:
      return "STORED";
  }
  return "unknown";
}

Status send_step(migrate::FrameWriter& w, const Message& m) {
  std::vector<uint8_t> p;
  migrate::put_u32(p, m.step);
  migrate::put_u32(p, 0);
  migrate::put_u64(p, m.a);
  migrate::put_u64(p, m.b);
  p.insert(p.end(), m.text.begin(), m.text.begin() + long(std::min<size_t>(m.text.size(), 4096)));
  return w.send(migrate::kNodeStep, p.data(), p.size());
}

Result<Message> read_step(migrate::FrameReader& r, const std::string& peer) {
  CKPT_ASSIGN(migrate::Frame f, migrate::expect(r, migrate::kNodeStep, peer));
  return parse_step(f, peer);
}

Result<Message> parse_step(const migrate::Frame& f, const std::string& peer) {
  if (f.type != migrate::kNodeStep)
    return make_error(EPROTO, peer + ": expected NODE_STEP, got " + migrate::frame_name(f.type));
  if (f.len < 24) return make_error(EBADMSG, peer + ": malformed NODE_STEP frame");
  Message m;
  m.step = migrate::get_u32(f.data);
  m.a = migrate::get_u64(f.data + 8);
  m.b = migrate::get_u64(f.data + 16);
  m.text.assign(reinterpret_cast<const char*>(f.data) + 24, f.len - 24);
  return m;
}

// Reports `step` and waits for GO; ABORT (or anything else) is an error.
Status report_and_wait(migrate::FrameWriter& w, migrate::FrameReader& r, Message m) {
  CKPT_TRY(send_step(w, m));
  CKPT_ASSIGN(Message next, read_step(r, "cr_job"));
  if (next.step == kGo) return {};
  if (next.step == kAbort)
    return make_error(ECANCELED, "aborted by cr_job" + (next.text.empty() ? "" : ": " + next.text));
  return make_error(EPROTO,
                    std::string("protocol error: expected GO, got ") + step_name(next.step));
}

Status fail(migrate::FrameWriter& w, const Error& e) {
  (void)send_step(w, {kFailed, 0, 0, e.message});
  return e;
}

}  // namespace ckpt::nodes
