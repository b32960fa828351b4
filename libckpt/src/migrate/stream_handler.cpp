// The connection handler of one migration (stream_handler.hpp).
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
#include "migrate/protocol.hpp"
#include "migrate/sandbox.hpp"
#include "migrate/staging.hpp"
#include "migrate/stream_handler.hpp"
#include "migrate/warm_restore.hpp"
#include "restore/restore_held.hpp"
#include "util/clock.hpp"

namespace ckpt::migrate {

namespace {

// Bytes landed before a kRuns message is sent (or kReportRuns runs).
constexpr uint64_t kReportBytes = 4 << 20;

// One generation being received into the staging directory.
struct IncomingGeneration {
  uint64_t generation = 0, parent = 0;
  std::array<uint8_t, 16> chain_id{};
  std::string tmp;
  UniqueFd pages;
  uint64_t content = 0;
  std::vector<iovec> pending;  // content frames not written yet (point into the reader's buffer)
  // Large content frames are received straight into a shared mapping of
  // pages.img (one copy fewer than recv + write), in 64 MiB windows.
  static constexpr uint64_t kWindow = 64ull << 20;
  std::vector<uint8_t*> windows;
  uint64_t file_size = 0;
  uint8_t* placed = nullptr;  // where the frame being received was placed

  ~IncomingGeneration() { unmap(); }
  IncomingGeneration() = default;
  IncomingGeneration& operator=(IncomingGeneration&& o) noexcept {
    unmap();
    generation = o.generation;
    parent = o.parent;
    chain_id = o.chain_id;
    tmp = std::move(o.tmp);
    pages = std::move(o.pages);
    content = o.content;
    pending = std::move(o.pending);
    windows = std::move(o.windows);
    o.windows.clear();
    file_size = o.file_size;
    placed = o.placed;
    pending_at = o.pending_at;
    return *this;
  }
  void unmap() {
    for (uint8_t* w : windows)
      if (w) ::munmap(w, kWindow);
    windows.clear();
  }
  // Where content bytes [content, content + len) go, if they fit one window.
  uint8_t* place(uint64_t len) {
    const uint64_t w = content / kWindow, off = content % kWindow;
    if (off + len > kWindow) return nullptr;  // straddles two windows: buffered path
    const uint64_t need = image::kPagesHeaderSize + (w + 1) * kWindow;
    if (file_size < need) {
      if (::ftruncate(pages.get(), off_t(need)) != 0) return nullptr;
      file_size = need;
    }
    if (windows.size() <= w) windows.resize(w + 1, nullptr);
    if (!windows[w]) {
      void* p = ::mmap(nullptr, kWindow, PROT_READ | PROT_WRITE, MAP_SHARED, pages.get(),
                       off_t(image::kPagesHeaderSize + w * kWindow));
      if (p == MAP_FAILED) return nullptr;
      windows[w] = static_cast<uint8_t*>(p);
    }
    return windows[w] + off;
  }

  uint64_t pending_at = 0;  // content offset of pending[0]
  Status flush() {
    size_t i = 0;
    uint64_t at = image::kPagesHeaderSize + pending_at;
    while (i < pending.size()) {
      int n = int(std::min<size_t>(pending.size() - i, IOV_MAX));
      ssize_t done = ::pwritev(pages.get(), &pending[i], n, off_t(at));
      if (done < 0) {
        if (errno == EINTR) continue;
        return sys_error("writing " + tmp + "/pages.img");
      }
      at += uint64_t(done);
      while (done > 0) {
        if (size_t(done) >= pending[i].iov_len) {
          done -= ssize_t(pending[i++].iov_len);
        } else {
          pending[i].iov_base = static_cast<char*>(pending[i].iov_base) + done;
          pending[i].iov_len -= size_t(done);
          done = 0;
        }
      }
    }
    pending.clear();
    return {};
  }
};

Status write_file(const std::string& path, const uint8_t* data, size_t len) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return sys_error("creating " + path);
  return write_all(fd.get(), data, len, path);
}

// The handler's whole session; runs under the allowlist.
class Session {
 public:
  Session(int conn, int ctl, const std::string& staging, const Mac& proof, uint64_t first_gen)
      : ctl_(ctl),
        staging_(staging),
        proof_(proof),
        first_gen_(first_gen),
        r_(conn),
        w_(conn),
        job_(staging, first_gen) {}

  uint64_t bytes() const { return r_.bytes(); }

  Status run() {
    // The gatekeeper checked AUTH; the sender waits for AUTH_OK, sent only
    // now, with the first generation number as this node's chain stands.
    std::vector<uint8_t> ok(proof_.begin(), proof_.end());
    put_u64(ok, first_gen_);
    CKPT_TRY(w_.send(kAuthOk, ok.data(), ok.size()));
    CKPT_ASSIGN(uint64_t gen, receive());
    // From here on this handler outlives the monitor: should the monitor die
    // while it lets the process go, only this handler can tell the sender
    // whether the process runs (the handover: docs/security.md).
    if (::prctl(PR_SET_PDEATHSIG, 0) != 0) return sys_error("PR_SET_PDEATHSIG");
    CKPT_TRY(ctl_send_u64(ctl_, Ctl::kComplete, gen));
    std::vector<UniqueFd> fds;  // the leader's status and stat, once the monitor holds it ready
    pid_t pid = 0;
    CtlMessage m = ctl_recv(ctl_, &fds);
    HeldProcess held;
    if (fds.size() == 2) {
      held.status = std::move(fds[0]);
      held.stat = std::move(fds[1]);
    }
    if (m.kind == Ctl::kHeld && m.data.size() == 4) {
      pid = pid_t(get_u32(reinterpret_cast<const uint8_t*>(m.data.data())));
      m = ctl_recv(ctl_);
    }
    if (m.kind == Ctl::kRunning && m.data.size() == 4)
      pid = pid_t(get_u32(reinterpret_cast<const uint8_t*>(m.data.data())));
    // The monitor died after kHeld: the kernel says whether it let the process go.
    const bool orphaned = m.kind == Ctl::kNone && pid > 0 && held.status.valid();
    const bool runs = m.kind == Ctl::kRunning || (orphaned && held_process_runs(held, 30));
    if (!runs) {
      std::string why = m.kind == Ctl::kError ? m.data
                        : orphaned            ? "the receiver died before the process ran"
                                              : "the receiver's parent went away";
      std::string line = "restore failed: " + why;
      (void)w_.send(kError, line.data(), line.size());
      return make_error(EIO, "restore failed: " + why);
    }
    std::vector<uint8_t> b;
    put_u32(b, uint32_t(pid));
    CKPT_TRY(w_.send(kRunning, b.data(), b.size()));
    // The sender ends its copy now and says so; a missing DONE is only
    // reported. COMMIT again first: from a killed sender's witness, which
    // could not know whether the sender's had gone out (migrate/witness.hpp).
    auto done = r_.next();
    while (done.ok() && done->type == kCommit && done->len == 8 && get_u64(done->data) == gen)
      done = r_.next();
    if (!done.ok() || done->type != kDone)
      return make_error(
          EIO,
          "the process runs here, but the sender did not confirm that its copy "
          "ended: " +
              (done.ok() ? std::string(frame_name(done->type)) + " frame" : done.error().message));
    return {};
  }

 private:
  // Reads generations until COMMIT; returns the generation to restore.
  Result<uint64_t> receive() {
    IncomingGeneration g;
    bool in_gen = false;
    uint64_t last = 0;  // last generation committed into staging
    std::array<uint8_t, 16> chain{};
    r_.set_before_refill([&] { return g.flush(); });
    r_.set_place([&](uint32_t type, uint64_t len) -> FrameReader::Placement {
      if (type != kContent || !in_gen || len % image::kPageSize || !g.flush().ok()) return {};
      FrameReader::Placement at;
      at.mem = g.placed = g.place(len);
      at.fd = g.pages.get();
      at.offset = image::kPagesHeaderSize + g.content;
      return at;
    });
    for (;;) {
      CKPT_ASSIGN(Frame f, r_.next());
      switch (f.type) {
        case kJobBegin:
        case kJobFile:
        case kJobEnd: {  // a job (migrate/job_stream); not mixed with single generations
          if (in_gen || (last && !job_.started()))
            return make_error(EBADMSG, "protocol error: job frames in a single-process stream");
          uint64_t done = 0;
          CKPT_TRY(job_.on_frame(f, &done));
          if (done) {
            last = done;
            CKPT_TRY(ctl_send_u64(ctl_, Ctl::kJobCommitted, last));
          }
          break;
        }
        case kGenBegin: {
          if (in_gen || f.len != 32 || job_.started())
            return make_error(EBADMSG, "protocol error: misplaced GEN_BEGIN");
          g = IncomingGeneration{};
          g.generation = get_u64(f.data);
          g.parent = get_u64(f.data + 8);
          std::memcpy(g.chain_id.data(), f.data + 16, 16);
          uint64_t want = last ? last + 1 : first_gen_;
          if (g.generation != want || g.parent != last || (last && g.chain_id != chain))
            return make_error(EBADMSG, "protocol error: generation " +
                                           std::to_string(g.generation) + " (parent " +
                                           std::to_string(g.parent) +
                                           ") does not continue the chain");
          chain = g.chain_id;
          g.tmp = staging_ + "/.tmp-" + std::to_string(g.generation);
          if (::mkdir(g.tmp.c_str(), 0700) != 0) return sys_error("creating " + g.tmp);
          std::string pages = g.tmp + "/" + image::kPagesFile;
          g.pages.reset(::open(pages.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
          if (!g.pages.valid()) return sys_error("creating " + pages);
          if (::lseek(g.pages.get(), image::kPagesHeaderSize, SEEK_SET) < 0)
            return sys_error("lseek");
          in_gen = true;
          early_ = false;
          announced_.clear();
          announced_end_ = 0;
          landed_.clear();
          break;
        }
        case kGenLayout:
          if (!in_gen || early_ || g.content != 0 || g.parent != 0)
            return make_error(EBADMSG, "protocol error: misplaced GEN_LAYOUT");
          CKPT_TRY(take_layout(g, f));
          break;
        case kGenRuns:
          if (!in_gen || !early_) return make_error(EBADMSG, "protocol error: misplaced GEN_RUNS");
          CKPT_TRY(take_runs(f));
          break;
        case kContent:
          if (!in_gen) return make_error(EBADMSG, "protocol error: CONTENT outside a generation");
          if (f.len % image::kPageSize)
            return make_error(EBADMSG, "protocol error: CONTENT of " + std::to_string(f.len) +
                                           " bytes (not whole pages)");
          if (early_) {
            if (announced_.empty() || announced_.front().second != f.len)
              return make_error(EBADMSG, "protocol error: CONTENT not announced by GEN_RUNS");
            if (landed_.empty()) put_u64(landed_, g.generation);
            put_u64(landed_, announced_.front().first);
            put_u64(landed_, f.len);
            put_u64(landed_, g.content);
            landed_bytes_ += f.len;
            announced_.pop_front();
          }
          if (f.data == g.placed) {  // already in pages.img
            g.placed = nullptr;
          } else {
            if (g.pending.empty()) g.pending_at = g.content;
            g.pending.push_back({const_cast<uint8_t*>(f.data), f.len});
          }
          g.content += f.len;
          if (g.pending.size() >= IOV_MAX) CKPT_TRY(g.flush());
          if (landed_.size() >= 8 + 24 * kReportRuns || landed_bytes_ >= kReportBytes)
            CKPT_TRY(report_landed(g));
          break;
        case kGenFiles:
          if (!in_gen) return make_error(EBADMSG, "protocol error: GEN_FILES outside a generation");
          if (!announced_.empty())
            return make_error(EBADMSG, "protocol error: GEN_RUNS announced content never sent");
          CKPT_TRY(report_landed(g));
          CKPT_TRY(g.flush());
          CKPT_TRY(finish(g, f));
          last = g.generation;
          in_gen = false;
          CKPT_TRY(ctl_send_u64(ctl_, Ctl::kCommitted, last));
          break;
        case kCommit:
          if (in_gen || job_.in_generation() || last == 0 || f.len != 8 || get_u64(f.data) != last)
            return make_error(EBADMSG, "protocol error: COMMIT of a generation not received whole");
          return last;
        case kError:
          return make_error(
              ECONNABORTED,
              "the sender gave up: " + std::string(reinterpret_cast<const char*>(f.data), f.len));
        default:
          return make_error(
              EBADMSG, std::string("protocol error: unexpected ") + frame_name(f.type) + " frame");
      }
    }
  }

  // GEN_LAYOUT: the full's layout, before its memory; the monitor builds
  // the process from it while the content arrives.
  Status take_layout(const IncomingGeneration& g, const Frame& f) {
    image::ImageMeta m;
    std::string err;
    if (f.len < 8 || !image::decode_meta(f.data + 8, f.len - 8, get_u64(f.data), &m, &err))
      return make_error(EBADMSG, "malformed GEN_LAYOUT frame" + (err.empty() ? "" : ": " + err));
    if (m.generation != g.generation || m.chain_id != g.chain_id || m.parent_generation != 0)
      return make_error(EBADMSG, "protocol error: GEN_LAYOUT of another generation");
    CKPT_TRY(write_file(g.tmp + "/layout.img", f.data, f.len));
    early_ = true;
    return ctl_send_u64(ctl_, Ctl::kLayout, g.generation);
  }

  // GEN_RUNS: addresses of the CONTENT frames to come, ascending.
  Status take_runs(const Frame& f) {
    if (f.len == 0 || f.len % 16) return make_error(EBADMSG, "malformed GEN_RUNS frame");
    for (uint64_t i = 0; i < f.len; i += 16) {
      const uint64_t va = get_u64(f.data + i), len = get_u64(f.data + i + 8);
      if (va % image::kPageSize || len == 0 || len % image::kPageSize ||
          len > max_payload(kContent) || va < announced_end_ || va + len < va)
        return make_error(EBADMSG, "protocol error: GEN_RUNS out of order or malformed");
      announced_.emplace_back(va, len);
      announced_end_ = va + len;
    }
    return {};
  }

  // Tells the monitor which runs are in pages.img now.
  Status report_landed(IncomingGeneration& g) {
    if (landed_.empty()) return {};
    CKPT_TRY(g.flush());
    CKPT_TRY(ctl_send(ctl_, Ctl::kRuns, landed_.data(), landed_.size()));
    landed_.clear();
    landed_bytes_ = 0;
    return {};
  }

  // Writes the generation's small files, commits it into staging and opens it
  // (every header and record checked).
  Status finish(IncomingGeneration& g, const Frame& f) {
    const uint8_t* p = f.data;
    uint64_t left = f.len;
    const uint8_t* part[3];
    uint64_t len[3];
    for (int i = 0; i < 3; ++i) {
      if (left < 8) return make_error(EBADMSG, "malformed GEN_FILES frame");
      len[i] = get_u64(p);
      p += 8;
      left -= 8;
      if (len[i] > left) return make_error(EBADMSG, "malformed GEN_FILES frame");
      part[i] = p;
      p += len[i];
      left -= len[i];
    }
    if (left != 0 || len[0] != image::kPagesHeaderSize)
      return make_error(EBADMSG, "malformed GEN_FILES frame");
    g.unmap();
    if (::ftruncate(g.pages.get(), off_t(image::kPagesHeaderSize + g.content)) != 0)
      return sys_error("sizing " + g.tmp + "/pages.img");
    CKPT_TRY(write_all(g.pages.get(), part[0], len[0], g.tmp + "/pages.img", 0));
    g.pages.reset();
    CKPT_TRY(write_file(g.tmp + "/" + image::kAddrFile, part[1], len[1]));
    CKPT_TRY(write_file(g.tmp + "/" + image::kMetaFile, part[2], len[2]));
    std::string dir = image::generation_dir(staging_, g.generation);
    if (::rename(g.tmp.c_str(), dir.c_str()) != 0) return sys_error("committing " + dir);
    CKPT_ASSIGN(auto reader, image::SnapshotReader::open(dir));
    const image::ImageMeta& m = reader->meta();
    if (m.generation != g.generation || m.parent_generation != g.parent ||
        m.chain_id != g.chain_id || reader->content_bytes() != g.content)
      return make_error(EBADMSG, "generation " + std::to_string(g.generation) +
                                     ": its files do not match what the stream announced");
    return {};
  }

  int ctl_;
  std::string staging_;
  Mac proof_;
  uint64_t first_gen_;
  FrameReader r_;
  FrameWriter w_;
  JobIncoming job_;
  // Metadata first (GEN_LAYOUT): runs announced whose CONTENT is still to
  // come, and the kRuns message of runs landed since the last one.
  bool early_ = false;
  std::deque<std::pair<uint64_t, uint64_t>> announced_;
  uint64_t announced_end_ = 0;
  std::vector<uint8_t> landed_;
  uint64_t landed_bytes_ = 0;
};

}  // namespace

Status receive_stream(int conn, int ctl, const std::string& staging, const Mac& proof,
                      uint64_t first_gen, uint64_t* bytes) {
  Session session(conn, ctl, staging, proof, first_gen);
  Status st = session.run();
  *bytes = session.bytes();
  return st;
}

}  // namespace ckpt::migrate
