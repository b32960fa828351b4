// The records of a meta.img, one function per record type to write it and
// one to read it (docs/format.md, "Records").
#include "image/meta_records.hpp"

#include "image/chain_link.hpp"
#include "image/credentials_codec.hpp"
#include "util/hash.hpp"

namespace ckpt::image {

namespace {

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

void put_generation(const ImageMeta& m, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  w.u64(m.generation);
  w.u64(m.parent_generation);
  w.bytes(m.chain_id.data(), 16);
  w.i64(m.created_unix_ns);
  w.str(m.kernel_release);
  put_record(out, RecordType::kGeneration, w, n);
}

void put_process(const ImageMeta& m, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  w.i32(m.process.pid);
  w.u32(m.process.umask);
  w.str(m.process.comm);
  w.str(m.process.cwd);
  put_record(out, RecordType::kProcess, w, n);
}

void put_signals(const ImageMeta& m, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  w.u32(uint32_t(m.process.sigactions.size()));
  for (const SignalAction& a : m.process.sigactions) {
    w.u32(a.signo);
    put_u64s(w, {a.handler, a.flags, a.restorer, a.mask});
  }
  put_record(out, RecordType::kSignals, w, n);
}

void put_mm(const ImageMeta& m, ByteWriter& out, uint64_t* n) {
  const MmRecord& mm = m.mm;
  ByteWriter w;
  put_u64s(w, {mm.start_code, mm.end_code, mm.start_data, mm.end_data, mm.start_brk, mm.brk,
               mm.start_stack, mm.arg_start, mm.arg_end, mm.env_start, mm.env_end});
  w.u32(uint32_t(mm.auxv.size()));
  for (uint64_t v : mm.auxv) w.u64(v);
  w.str(mm.exe_path);
  put_record(out, RecordType::kMm, w, n);
}

void put_vdso(const ImageMeta& m, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  w.u64(m.vdso.vdso_size);
  w.u64(m.vdso.vdso_hash);
  put_record(out, RecordType::kVdso, w, n);
}

void put_vma(const VmaRecord& v, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  put_u64s(w, {v.start, v.end});
  w.u32(v.prot);
  w.u32(v.flags);
  put_u64s(w, {v.pgoff, v.dev, v.ino, v.file_size});
  w.i64(v.mtime_ns);
  w.str(v.name);
  if (v.advice) w.u32(v.advice);  // appended; absent means none (older images too)
  put_record(out, RecordType::kVma, w, n);
}

void put_thread(const ThreadRecord& t, ByteWriter& out, uint64_t* n) {
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
  put_record(out, RecordType::kThread, w, n);
}

void put_credentials(const TaskCredentials& c, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  encode_credentials(c, w);
  put_record(out, RecordType::kCredentials, w, n);
}

void put_process_state(const ImageMeta& m, ByteWriter& out, uint64_t* n) {
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
  put_record(out, RecordType::kProcessState, w, n);
}

void put_posix_timer(const PosixTimer& t, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  for (int32_t v : {t.id, t.clock, t.notify, t.signo}) w.i32(v);
  w.u64(t.value);
  w.i32(t.notify_tid);
  put_u64s(w, {t.setting.interval_ns, t.setting.value_ns});
  put_record(out, RecordType::kPosixTimer, w, n);
}

void put_complete(const ImageMeta& m, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  w.u32(uint32_t(m.complete.size()));
  for (const MemRange& r : m.complete) put_u64s(w, {r.start, r.end});
  put_record(out, RecordType::kComplete, w, n);
}

void put_tracker(const ImageMeta& m, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  w.str(m.tracker);
  w.i32(m.tracker_fd);
  put_record(out, RecordType::kTracker, w, n);
}

void put_file(const FileRecord& f, ByteWriter& out, uint64_t* n) {
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
  put_record(out, RecordType::kFile, w, n);
}

void put_scratch_file(const ScratchFile& f, ByteWriter& out, uint64_t* n) {
  ByteWriter w;
  w.str(f.path);
  for (uint32_t v : {f.type, f.mode, f.uid, f.gid}) w.u32(v);
  w.u64(f.data.size());
  w.bytes(f.data.data(), f.data.size());
  if (f.flags || f.file_size) w.u32(f.flags);
  if (f.file_size) w.u64(f.file_size);
  put_record(out, RecordType::kScratchFile, w, n);
}

bool get_generation(ByteReader& r, ImageMeta* m) {
  return r.u64(&m->generation) && r.u64(&m->parent_generation) && r.bytes(m->chain_id.data(), 16) &&
         r.i64(&m->created_unix_ns) && r.str(&m->kernel_release);
}

bool get_process(ByteReader& r, ImageMeta* m) {
  return r.i32(&m->process.pid) && r.u32(&m->process.umask) && r.str(&m->process.comm) &&
         r.str(&m->process.cwd);
}

bool get_mm(ByteReader& r, ImageMeta* m) {
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

bool get_signals(ByteReader& r, ImageMeta* m) {
  uint32_t n;
  if (!r.u32(&n) || n > 64) return false;
  m->process.sigactions.resize(n);
  for (SignalAction& a : m->process.sigactions)
    if (!r.u32(&a.signo) || !r.u64(&a.handler) || !r.u64(&a.flags) || !r.u64(&a.restorer) ||
        !r.u64(&a.mask))
      return false;
  return true;
}

bool get_complete(ByteReader& r, ImageMeta* m) {
  uint32_t n;
  if (!r.u32(&n) || n > r.left() / 16) return false;
  m->complete.resize(n);
  for (MemRange& c : m->complete)
    if (!r.u64(&c.start) || !r.u64(&c.end) || c.start > c.end) return false;
  return true;
}

bool get_tracker(ByteReader& r, ImageMeta* m) {
  return r.str(&m->tracker) && r.i32(&m->tracker_fd);
}

bool get_vdso(ByteReader& r, ImageMeta* m) {
  return r.u64(&m->vdso.vdso_size) && r.u64(&m->vdso.vdso_hash);
}

bool get_vma(ByteReader& r, ImageMeta* m) {
  VmaRecord v;
  bool ok = r.u64(&v.start) && r.u64(&v.end) && r.u32(&v.prot) && r.u32(&v.flags) &&
            r.u64(&v.pgoff) && r.u64(&v.dev) && r.u64(&v.ino) && r.u64(&v.file_size) &&
            r.i64(&v.mtime_ns) && r.str(&v.name);
  // Appended later: absent in older images (no advice).
  if (ok && r.left() > 0) ok = r.u32(&v.advice) && (v.advice & ~uint32_t(kAdvKnown)) == 0;
  if (ok) m->vmas.push_back(std::move(v));
  return ok;
}

bool get_thread(ByteReader& r, ImageMeta* m) {
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

bool get_process_state(ByteReader& r, ImageMeta* m) {
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

bool get_posix_timer(ByteReader& r, ImageMeta* m) {
  PosixTimer t;
  bool ok = r.i32(&t.id) && r.i32(&t.clock) && r.i32(&t.notify) && r.i32(&t.signo) &&
            r.u64(&t.value) && r.i32(&t.notify_tid) && get_timer(r, &t.setting);
  if (ok) m->state.timers.push_back(t);
  return ok;
}

bool get_credentials(ByteReader& r, ImageMeta* m) {
  TaskCredentials c;
  if (!decode_credentials(r, &c)) return false;
  m->credentials.push_back(std::move(c));
  return true;
}

bool get_file(ByteReader& r, ImageMeta* m) {
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
      if (!r.u32(&kind) || !r.u32(&l.type) || !r.u64(&l.start) || !r.u64(&l.end) || !r.i32(&l.pid))
        return false;
      l.kind = LockKind(kind);
    }
    if (!r.i32(&f.owner.type) || !r.i32(&f.owner.pid) || !r.i32(&f.owner.signo)) return false;
  }
  m->files.push_back(std::move(f));
  return true;
}

bool get_scratch_file(ByteReader& r, ImageMeta* m) {
  ScratchFile f;
  uint64_t n;
  if (!r.str(&f.path) || !r.u32(&f.type) || !r.u32(&f.mode) || !r.u32(&f.uid) || !r.u32(&f.gid) ||
      !r.u64(&n) || n > r.left())
    return false;
  f.data.resize(n);
  if (n && !r.bytes(f.data.data(), n)) return false;
  if (r.left() > 0 && !r.u32(&f.flags)) return false;
  if (r.left() > 0 && !r.u64(&f.file_size)) return false;
  m->scratch.push_back(std::move(f));
  return true;
}

}  // namespace

void append_record(ByteWriter& out, RecordType type, ByteWriter& payload, uint64_t* count) {
  put_record(out, type, payload, count);
}

std::vector<uint8_t> encode_meta(const ImageMeta& m, uint64_t* nrecords) {
  ByteWriter out;
  *nrecords = 0;
  put_generation(m, out, nrecords);
  put_process(m, out, nrecords);
  put_signals(m, out, nrecords);
  put_mm(m, out, nrecords);
  put_vdso(m, out, nrecords);
  for (const VmaRecord& v : m.vmas) put_vma(v, out, nrecords);
  for (const ThreadRecord& t : m.threads) put_thread(t, out, nrecords);
  for (const TaskCredentials& c : m.credentials) put_credentials(c, out, nrecords);
  put_process_state(m, out, nrecords);
  for (const PosixTimer& t : m.state.timers) put_posix_timer(t, out, nrecords);
  if (!m.complete.empty()) put_complete(m, out, nrecords);
  if (!m.tracker.empty()) put_tracker(m, out, nrecords);
  for (const FileRecord& f : m.files) put_file(f, out, nrecords);
  for (const ScratchFile& f : m.scratch) put_scratch_file(f, out, nrecords);
  return std::move(out.data());
}

bool decode_payload(RecordType type, ByteReader& r, ImageMeta* m) {
  switch (type) {
    case RecordType::kGeneration:
      return get_generation(r, m);
    case RecordType::kProcess:
      return get_process(r, m);
    case RecordType::kMm:
      return get_mm(r, m);
    case RecordType::kSignals:
      return get_signals(r, m);
    case RecordType::kComplete:
      return get_complete(r, m);
    case RecordType::kTracker:
      return get_tracker(r, m);
    case RecordType::kVdso:
      return get_vdso(r, m);
    case RecordType::kVma:
      return get_vma(r, m);
    case RecordType::kThread:
      return get_thread(r, m);
    case RecordType::kProcessState:
      return get_process_state(r, m);
    case RecordType::kPosixTimer:
      return get_posix_timer(r, m);
    case RecordType::kCredentials:
      return get_credentials(r, m);
    case RecordType::kFile:
      return get_file(r, m);
    case RecordType::kScratchFile:
      return get_scratch_file(r, m);
    case RecordType::kJobMember:
    case RecordType::kJobShare:
      return false;  // job.img's records have no place in a member's metadata
    case RecordType::kChainLink:
      return decode_chain_link(r, &m->link);
  }
  return true;  // unknown record types from a newer minor revision are skipped
}

}  // namespace ckpt::image
