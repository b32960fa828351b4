#include "image/format.hpp"

#include "image/chain_link.hpp"
#include "image/credentials_codec.hpp"
#include "util/hash.hpp"

namespace ckpt::image {

namespace {

constexpr size_t kHashOffset = 56;

uint64_t header_hash(const uint8_t* block, size_t size) {
  std::vector<uint8_t> copy(block, block + size);
  std::memset(copy.data() + kHashOffset, 0, 8);
  return xxh3(copy.data(), copy.size());
}

// A record is: u32 type, u32 length, payload, u64 xxh3(type..payload).
void put_record(ByteWriter& out, RecordType type, ByteWriter& payload, uint64_t* count) {
  ByteWriter rec;
  rec.u32(uint32_t(type));
  rec.u32(uint32_t(payload.data().size()));
  rec.bytes(payload.data().data(), payload.data().size());
  uint64_t h = xxh3(rec.data().data(), rec.data().size());
  rec.u64(h);
  out.bytes(rec.data().data(), rec.data().size());
  ++*count;
}

void put_u64s(ByteWriter& w, std::initializer_list<uint64_t> vs) {
  for (uint64_t v : vs) w.u64(v);
}

void put_siginfos(ByteWriter& w, const std::vector<SigInfo>& v) {
  w.u32(uint32_t(v.size()));
  for (const SigInfo& si : v) w.bytes(si.data(), si.size());
}

bool get_siginfos(ByteReader& r, std::vector<SigInfo>* v) {
  uint32_t n;
  if (!r.u32(&n) || n > r.left() / sizeof(SigInfo)) return false;
  v->resize(n);
  for (SigInfo& si : *v)
    if (!r.bytes(si.data(), si.size())) return false;
  return true;
}

bool get_timer(ByteReader& r, TimerSetting* t) {
  return r.u64(&t->interval_ns) && r.u64(&t->value_ns);
}

}  // namespace

std::vector<uint8_t> encode_header(FileHeader h) {
  std::vector<uint8_t> block(h.header_size, 0);
  uint8_t* p = block.data();
  std::memcpy(p, h.magic.data(), 8);
  std::memcpy(p + 8, &h.version, 4);
  std::memcpy(p + 12, &h.header_size, 4);
  std::memcpy(p + 16, &h.generation, 8);
  std::memcpy(p + 24, h.chain_id.data(), 16);
  std::memcpy(p + 40, &h.count, 8);
  std::memcpy(p + 48, &h.flags, 8);
  uint64_t hh = header_hash(p, block.size());
  std::memcpy(p + kHashOffset, &hh, 8);
  return block;
}

bool decode_header(const uint8_t* block, size_t avail, const Magic& magic, FileHeader* out,
                   std::string* err) {
  if (avail < kSmallHeaderSize) {
    *err = "file is truncated (no complete header)";
    return false;
  }
  FileHeader h;
  std::memcpy(h.magic.data(), block, 8);
  if (h.magic != magic) {
    *err = "bad magic (not a libckpt file of this kind)";
    return false;
  }
  std::memcpy(&h.version, block + 8, 4);
  if (h.version < kOldestFormatVersion || h.version > kFormatVersion) {
    *err = "unsupported format version " + std::to_string(h.version) + " (this build reads " +
           std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion) + ")";
    return false;
  }
  std::memcpy(&h.header_size, block + 12, 4);
  if (h.header_size < kSmallHeaderSize || h.header_size > kPagesHeaderSize) {
    *err = "bad header size";
    return false;
  }
  if (avail < h.header_size) {
    *err = "file is truncated (no complete header)";
    return false;
  }
  std::memcpy(&h.generation, block + 16, 8);
  std::memcpy(h.chain_id.data(), block + 24, 16);
  std::memcpy(&h.count, block + 40, 8);
  std::memcpy(&h.flags, block + 48, 8);
  std::memcpy(&h.header_hash, block + kHashOffset, 8);
  if (header_hash(block, h.header_size) != h.header_hash) {
    *err = "header checksum mismatch";
    return false;
  }
  *out = h;
  return true;
}

std::vector<uint8_t> encode_meta(const ImageMeta& m, uint64_t* nrecords) {
  ByteWriter out;
  *nrecords = 0;
  {
    ByteWriter w;
    w.u64(m.generation);
    w.u64(m.parent_generation);
    w.bytes(m.chain_id.data(), 16);
    w.i64(m.created_unix_ns);
    w.str(m.kernel_release);
    put_record(out, RecordType::kGeneration, w, nrecords);
  }
  {
    ByteWriter w;
    w.i32(m.process.pid);
    w.u32(m.process.umask);
    w.str(m.process.comm);
    w.str(m.process.cwd);
    put_record(out, RecordType::kProcess, w, nrecords);
  }
  {
    ByteWriter w;
    w.u32(uint32_t(m.process.sigactions.size()));
    for (const SignalAction& a : m.process.sigactions) {
      w.u32(a.signo);
      put_u64s(w, {a.handler, a.flags, a.restorer, a.mask});
    }
    put_record(out, RecordType::kSignals, w, nrecords);
  }
  {
    const MmRecord& mm = m.mm;
    ByteWriter w;
    put_u64s(w, {mm.start_code, mm.end_code, mm.start_data, mm.end_data, mm.start_brk, mm.brk,
                 mm.start_stack, mm.arg_start, mm.arg_end, mm.env_start, mm.env_end});
    w.u32(uint32_t(mm.auxv.size()));
    for (uint64_t v : mm.auxv) w.u64(v);
    w.str(mm.exe_path);
    put_record(out, RecordType::kMm, w, nrecords);
  }
  {
    ByteWriter w;
    w.u64(m.vdso.vdso_size);
    w.u64(m.vdso.vdso_hash);
    put_record(out, RecordType::kVdso, w, nrecords);
  }
  for (const VmaRecord& v : m.vmas) {
    ByteWriter w;
    put_u64s(w, {v.start, v.end});
    w.u32(v.prot);
    w.u32(v.flags);
    put_u64s(w, {v.pgoff, v.dev, v.ino, v.file_size});
    w.i64(v.mtime_ns);
    w.str(v.name);
    if (v.advice) w.u32(v.advice);  // appended; absent means none (older images too)
    put_record(out, RecordType::kVma, w, nrecords);
  }
  for (const ThreadRecord& t : m.threads) {
    ByteWriter w;
    w.i32(t.tid);
    w.i32(t.pending_signal);
    for (uint64_t r : t.gpregs) w.u64(r);
    w.u32(uint32_t(t.xstate.size()));
    w.bytes(t.xstate.data(), t.xstate.size());
    w.u64(t.rseq_ptr);
    w.u32(t.rseq_len);
    w.u32(t.rseq_sig);
    w.u64(t.sigmask);
    w.u64(t.restart_nr);
    w.u64(t.restart_rip);
    put_u64s(w, {t.altstack_sp, t.altstack_size});
    w.u32(t.altstack_flags);
    put_u64s(w, {t.clear_child_tid, t.robust_list, t.robust_len});
    put_siginfos(w, t.pending);
    w.u32(uint32_t(t.seccomp.size()));
    for (const SeccompFilter& f : t.seccomp) {
      w.u64(f.flags);
      w.u32(uint32_t(f.instructions.size()));
      w.bytes(f.instructions.data(), f.instructions.size());
    }
    put_record(out, RecordType::kThread, w, nrecords);
  }
  for (const TaskCredentials& c : m.credentials) {
    ByteWriter w;
    encode_credentials(c, w);
    put_record(out, RecordType::kCredentials, w, nrecords);
  }
  {
    const ProcessState& ps = m.state;
    ByteWriter w;
    w.u32(ps.has_rlimits);
    for (uint64_t v : ps.rlimits) w.u64(v);
    w.u32(ps.personality);
    w.i32(ps.dumpable);
    w.i32(ps.pdeathsig);
    w.u32(ps.no_new_privs);
    for (const TimerSetting& t : ps.itimers) put_u64s(w, {t.interval_ns, t.value_ns});
    put_siginfos(w, ps.pending);
    put_record(out, RecordType::kProcessState, w, nrecords);
  }
  for (const PosixTimer& t : m.state.timers) {
    ByteWriter w;
    for (int32_t v : {t.id, t.clock, t.notify, t.signo}) w.i32(v);
    w.u64(t.value);
    w.i32(t.notify_tid);
    put_u64s(w, {t.setting.interval_ns, t.setting.value_ns});
    put_record(out, RecordType::kPosixTimer, w, nrecords);
  }
  if (!m.complete.empty()) {
    ByteWriter w;
    w.u32(uint32_t(m.complete.size()));
    for (const MemRange& r : m.complete) put_u64s(w, {r.start, r.end});
    put_record(out, RecordType::kComplete, w, nrecords);
  }
  if (!m.tracker.empty()) {
    ByteWriter w;
    w.str(m.tracker);
    w.i32(m.tracker_fd);
    put_record(out, RecordType::kTracker, w, nrecords);
  }
  for (const FileRecord& f : m.files) {
    ByteWriter w;
    w.i32(f.fd);
    w.u32(uint32_t(f.kind));
    w.u32(f.flags);
    w.u32(f.fd_flags);
    put_u64s(w, {f.offset, f.dev, f.ino, f.size});
    w.i64(f.mtime_ns);
    w.str(f.path);
    // Appended fields, written only when one differs from its default, so
    // records of the kinds older readers know stay byte for byte as they were.
    if (f.has_appended()) {
      w.i32(f.dup_of);
      w.u32(uint32_t(f.params.size()));
      for (uint64_t p : f.params) w.u64(p);
      w.u32(uint32_t(f.data.size()));
      w.bytes(f.data.data(), f.data.size());
    }
    if (f.has_second()) {
      w.u32(uint32_t(f.locks.size()));
      for (const FileLock& l : f.locks) {
        w.u32(uint32_t(l.kind));
        w.u32(l.type);
        put_u64s(w, {l.start, l.end});
        w.i32(l.pid);
      }
      w.i32(f.owner.type);
      w.i32(f.owner.pid);
      w.i32(f.owner.signo);
    }
    put_record(out, RecordType::kFile, w, nrecords);
  }
  for (const ScratchFile& f : m.scratch) {
    ByteWriter w;
    w.str(f.path);
    for (uint32_t v : {f.type, f.mode, f.uid, f.gid}) w.u32(v);
    w.u64(f.data.size());
    w.bytes(f.data.data(), f.data.size());
    if (f.flags || f.file_size) w.u32(f.flags);
    if (f.file_size) w.u64(f.file_size);
    put_record(out, RecordType::kScratchFile, w, nrecords);
  }
  return std::move(out.data());
}

namespace {

bool decode_payload(RecordType type, ByteReader& r, ImageMeta* m) {
  switch (type) {
    case RecordType::kGeneration:
      return r.u64(&m->generation) && r.u64(&m->parent_generation) &&
             r.bytes(m->chain_id.data(), 16) && r.i64(&m->created_unix_ns) &&
             r.str(&m->kernel_release);
    case RecordType::kProcess:
      return r.i32(&m->process.pid) && r.u32(&m->process.umask) && r.str(&m->process.comm) &&
             r.str(&m->process.cwd);
    case RecordType::kMm: {
      MmRecord& mm = m->mm;
      for (uint64_t* f :
           {&mm.start_code, &mm.end_code, &mm.start_data, &mm.end_data, &mm.start_brk, &mm.brk,
            &mm.start_stack, &mm.arg_start, &mm.arg_end, &mm.env_start, &mm.env_end})
        if (!r.u64(f)) return false;
      uint32_t n;
      if (!r.u32(&n) || n > r.left() / 8) return false;
      mm.auxv.resize(n);
      for (uint64_t& v : mm.auxv)
        if (!r.u64(&v)) return false;
      return r.str(&mm.exe_path);
    }
    case RecordType::kSignals: {
      uint32_t n;
      if (!r.u32(&n) || n > 64) return false;
      m->process.sigactions.resize(n);
      for (SignalAction& a : m->process.sigactions)
        if (!r.u32(&a.signo) || !r.u64(&a.handler) || !r.u64(&a.flags) || !r.u64(&a.restorer) ||
            !r.u64(&a.mask))
          return false;
      return true;
    }
    case RecordType::kComplete: {
      uint32_t n;
      if (!r.u32(&n) || n > r.left() / 16) return false;
      m->complete.resize(n);
      for (MemRange& c : m->complete)
        if (!r.u64(&c.start) || !r.u64(&c.end) || c.start > c.end) return false;
      return true;
    }
    case RecordType::kTracker:
      return r.str(&m->tracker) && r.i32(&m->tracker_fd);
    case RecordType::kVdso:
      return r.u64(&m->vdso.vdso_size) && r.u64(&m->vdso.vdso_hash);
    case RecordType::kVma: {
      VmaRecord v;
      bool ok = r.u64(&v.start) && r.u64(&v.end) && r.u32(&v.prot) && r.u32(&v.flags) &&
                r.u64(&v.pgoff) && r.u64(&v.dev) && r.u64(&v.ino) && r.u64(&v.file_size) &&
                r.i64(&v.mtime_ns) && r.str(&v.name);
      // Appended later: absent in older images (no advice).
      if (ok && r.left() > 0) ok = r.u32(&v.advice) && (v.advice & ~uint32_t(kAdvKnown)) == 0;
      if (ok) m->vmas.push_back(std::move(v));
      return ok;
    }
    case RecordType::kThread: {
      ThreadRecord t;
      if (!r.i32(&t.tid) || !r.i32(&t.pending_signal)) return false;
      for (uint64_t& g : t.gpregs)
        if (!r.u64(&g)) return false;
      uint32_t n;
      if (!r.u32(&n) || n > r.left()) return false;
      t.xstate.resize(n);
      // (n == 0: an empty vector's data() may be null, and memcpy from or to
      // null is undefined even for 0 bytes; UBSan in fuzz_meta_records.)
      if (n && !r.bytes(t.xstate.data(), n)) return false;
      if (!r.u64(&t.rseq_ptr) || !r.u32(&t.rseq_len) || !r.u32(&t.rseq_sig)) return false;
      // Appended fields: optional for readers of older images.
      if (r.left() >= 8 && !r.u64(&t.sigmask)) return false;
      if (r.left() >= 16 && (!r.u64(&t.restart_nr) || !r.u64(&t.restart_rip))) return false;
      if (r.left() > 0) {  // the second appended block is all or nothing
        uint32_t nfilters;
        if (!r.u64(&t.altstack_sp) || !r.u64(&t.altstack_size) || !r.u32(&t.altstack_flags) ||
            !r.u64(&t.clear_child_tid) || !r.u64(&t.robust_list) || !r.u64(&t.robust_len) ||
            !get_siginfos(r, &t.pending) || !r.u32(&nfilters) || nfilters > r.left() / 12)
          return false;
        t.seccomp.resize(nfilters);
        for (SeccompFilter& f : t.seccomp) {
          uint32_t len;
          if (!r.u64(&f.flags) || !r.u32(&len) || len > r.left() || len % 8) return false;
          f.instructions.resize(len);
          if (len && !r.bytes(f.instructions.data(), len)) return false;
        }
      }
      m->threads.push_back(std::move(t));
      return true;
    }
    case RecordType::kProcessState: {
      ProcessState& ps = m->state;
      uint32_t has, nnp;
      if (!r.u32(&has)) return false;
      ps.has_rlimits = has != 0;
      for (uint64_t& v : ps.rlimits)
        if (!r.u64(&v)) return false;
      if (!r.u32(&ps.personality) || !r.i32(&ps.dumpable) || !r.i32(&ps.pdeathsig) || !r.u32(&nnp))
        return false;
      ps.no_new_privs = nnp != 0;
      for (TimerSetting& t : ps.itimers)
        if (!get_timer(r, &t)) return false;
      return get_siginfos(r, &ps.pending);
    }
    case RecordType::kPosixTimer: {
      PosixTimer t;
      bool ok = r.i32(&t.id) && r.i32(&t.clock) && r.i32(&t.notify) && r.i32(&t.signo) &&
                r.u64(&t.value) && r.i32(&t.notify_tid) && get_timer(r, &t.setting);
      if (ok) m->state.timers.push_back(t);
      return ok;
    }
    case RecordType::kCredentials: {
      TaskCredentials c;
      if (!decode_credentials(r, &c)) return false;
      m->credentials.push_back(std::move(c));
      return true;
    }
    case RecordType::kFile: {
      FileRecord f;
      uint32_t kind;
      bool ok = r.i32(&f.fd) && r.u32(&kind) && r.u32(&f.flags) && r.u32(&f.fd_flags) &&
                r.u64(&f.offset) && r.u64(&f.dev) && r.u64(&f.ino) && r.u64(&f.size) &&
                r.i64(&f.mtime_ns) && r.str(&f.path);
      if (!ok) return false;
      f.kind = FileKind(kind);
      // Appended fields: absent in older images and for plain files.
      if (r.left() > 0) {
        uint32_t n;
        if (!r.i32(&f.dup_of) || !r.u32(&n) || n > r.left() / 8) return false;
        f.params.resize(n);
        for (uint64_t& p : f.params)
          if (!r.u64(&p)) return false;
        if (!r.u32(&n) || n > r.left()) return false;
        f.data.resize(n);
        if (n && !r.bytes(f.data.data(), n)) return false;
      }
      // The second block (locks, owner): all or nothing.
      if (r.left() > 0) {
        uint32_t n;
        if (!r.u32(&n) || n > r.left() / 28) return false;
        f.locks.resize(n);
        for (FileLock& l : f.locks) {
          uint32_t kind;
          if (!r.u32(&kind) || !r.u32(&l.type) || !r.u64(&l.start) || !r.u64(&l.end) ||
              !r.i32(&l.pid))
            return false;
          l.kind = LockKind(kind);
        }
        if (!r.i32(&f.owner.type) || !r.i32(&f.owner.pid) || !r.i32(&f.owner.signo)) return false;
      }
      m->files.push_back(std::move(f));
      return true;
    }
    case RecordType::kScratchFile: {
      ScratchFile f;
      uint64_t n;
      if (!r.str(&f.path) || !r.u32(&f.type) || !r.u32(&f.mode) || !r.u32(&f.uid) ||
          !r.u32(&f.gid) || !r.u64(&n) || n > r.left())
        return false;
      f.data.resize(n);
      if (n && !r.bytes(f.data.data(), n)) return false;
      if (r.left() > 0 && !r.u32(&f.flags)) return false;
      if (r.left() > 0 && !r.u64(&f.file_size)) return false;
      m->scratch.push_back(std::move(f));
      return true;
    }
    case RecordType::kJobMember:
    case RecordType::kJobShare:
      return false;  // job.img's records have no place in a member's metadata
    case RecordType::kChainLink:
      return decode_chain_link(r, &m->link);
  }
  return true;  // unknown record types from a newer minor revision are skipped
}

}  // namespace

bool for_each_record(const uint8_t* p, size_t n, uint64_t nrecords, const char* what,
                     const std::function<bool(RecordType, ByteReader&)>& f, std::string* err) {
  size_t off = 0;
  for (uint64_t i = 0; i < nrecords; ++i) {
    uint32_t type, len;
    if (n - off < 16 ||
        (std::memcpy(&type, p + off, 4), std::memcpy(&len, p + off + 4, 4), n - off - 16 < len)) {
      *err = std::string(what) + " is truncated at record " + std::to_string(i);
      return false;
    }
    uint64_t stored;
    std::memcpy(&stored, p + off + 8 + len, 8);
    if (xxh3(p + off, 8 + len) != stored) {
      *err = std::string(what) + " record " + std::to_string(i) + " checksum mismatch";
      return false;
    }
    ByteReader r(p + off + 8, len);
    if (!f(RecordType(type), r)) {
      *err = std::string(what) + " record " + std::to_string(i) + " is malformed";
      return false;
    }
    off += 16 + len;
  }
  if (off != n) {
    *err = std::string(what) + " has " + std::to_string(n - off) + " unexpected trailing bytes";
    return false;
  }
  return true;
}

void append_record(ByteWriter& out, RecordType type, ByteWriter& payload, uint64_t* count) {
  put_record(out, type, payload, count);
}

bool decode_meta(const uint8_t* p, size_t n, uint64_t nrecords, ImageMeta* out, std::string* err) {
  ImageMeta m;
  if (!for_each_record(
          p, n, nrecords, "metadata",
          [&](RecordType type, ByteReader& r) { return decode_payload(type, r, &m); }, err))
    return false;
  *out = std::move(m);
  return true;
}

void encode_page_hashes(const std::vector<PageHash>& t, std::vector<uint8_t>& out) {
  ByteWriter w;
  w.u64(t.size());
  for (const PageHash& p : t) put_u64s(w, {p.vaddr, p.hash});
  uint64_t h = xxh3(w.data().data(), w.data().size());
  w.u64(h);
  out.insert(out.end(), w.data().begin(), w.data().end());
}

bool decode_page_hashes(const uint8_t* in, size_t n, std::vector<PageHash>* out) {
  uint64_t count;
  if (n < 16) return false;
  std::memcpy(&count, in, 8);
  if (count > (n - 16) / 16 || 16 + count * 16 != n) return false;
  uint64_t stored;
  std::memcpy(&stored, in + n - 8, 8);
  if (xxh3(in, n - 8) != stored) return false;
  out->resize(count);
  std::memcpy(out->data(), in + 8, count * 16);
  return true;
}

void encode_run(const PageRun& r, uint8_t out[kRunRecordSize]) {
  std::memcpy(out, &r.vaddr, 8);
  std::memcpy(out + 8, &r.npages, 4);
  std::memcpy(out + 12, &r.flags, 4);
  std::memcpy(out + 16, &r.content_offset, 8);
  std::memcpy(out + 24, &r.content_hash, 8);
  uint64_t h = xxh3(out, 32);
  std::memcpy(out + 32, &h, 8);
}

bool decode_run(const uint8_t in[kRunRecordSize], PageRun* out) {
  uint64_t stored;
  std::memcpy(&stored, in + 32, 8);
  if (xxh3(in, 32) != stored) return false;
  std::memcpy(&out->vaddr, in, 8);
  std::memcpy(&out->npages, in + 8, 4);
  std::memcpy(&out->flags, in + 12, 4);
  std::memcpy(&out->content_offset, in + 16, 8);
  std::memcpy(&out->content_hash, in + 24, 8);
  return true;
}

}  // namespace ckpt::image
