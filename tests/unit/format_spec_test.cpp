// The bytes on disk are the ones docs/format.md specifies: each file is
// decoded here by offsets taken from that document, and the metadata stream
// is re-encoded independently of format.cpp and compared byte for byte. A
// golden version-1 generation, checked in next to this file, must keep
// reading back (old chains keep restoring) and the writer must keep producing
// it byte for byte (the format does not drift without a version change).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <map>

#include "image/chain.hpp"
#include "image/format.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"
#include "image_test_util.hpp"
#include "util/hash.hpp"

namespace ckpt::image {
namespace {

using ckpt::testing::AlignedBytes;
using ckpt::testing::read_bytes;
using ckpt::testing::TempDir;
using ckpt::testing::write_bytes;

// Little-endian encoder written from docs/format.md, not from format.cpp.
struct Le {
  std::vector<uint8_t> b;
  void u8(uint8_t v) { b.push_back(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(uint8_t(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(uint8_t(v >> (8 * i)));
  }
  void str(const std::string& s) {
    u32(uint32_t(s.size()));
    b.insert(b.end(), s.begin(), s.end());
  }
  void raw(const void* p, size_t n) {
    auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
};

uint32_t le32(const std::vector<uint8_t>& b, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | b.at(off + size_t(i));
  return v;
}
uint64_t le64(const std::vector<uint8_t>& b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b.at(off + size_t(i));
  return v;
}

void record(Le& out, uint32_t type, const Le& payload) {
  Le r;
  r.u32(type);
  r.u32(uint32_t(payload.b.size()));
  r.raw(payload.b.data(), payload.b.size());
  uint64_t h = ckpt::xxh3(r.b.data(), r.b.size());
  r.u64(h);
  out.raw(r.b.data(), r.b.size());
}

// The metadata record stream of docs/format.md, section "meta.img".
std::vector<uint8_t> spec_meta_stream(const ImageMeta& m, uint64_t* count) {
  Le out;
  *count = 0;
  {
    Le p;
    p.u64(m.generation);
    p.u64(m.parent_generation);
    p.raw(m.chain_id.data(), 16);
    p.u64(uint64_t(m.created_unix_ns));
    p.str(m.kernel_release);
    record(out, 1, p);
    ++*count;
  }
  {
    Le p;
    p.u32(uint32_t(m.process.pid));
    p.u32(m.process.umask);
    p.str(m.process.comm);
    p.str(m.process.cwd);
    record(out, 2, p);
    ++*count;
  }
  {
    Le p;
    p.u32(uint32_t(m.process.sigactions.size()));
    for (const SignalAction& a : m.process.sigactions) {
      p.u32(a.signo);
      p.u64(a.handler);
      p.u64(a.flags);
      p.u64(a.restorer);
      p.u64(a.mask);
    }
    record(out, 8, p);
    ++*count;
  }
  {
    const MmRecord& mm = m.mm;
    Le p;
    for (uint64_t v : {mm.start_code, mm.end_code, mm.start_data, mm.end_data, mm.start_brk, mm.brk,
                       mm.start_stack, mm.arg_start, mm.arg_end, mm.env_start, mm.env_end})
      p.u64(v);
    p.u32(uint32_t(mm.auxv.size()));
    for (uint64_t v : mm.auxv) p.u64(v);
    p.str(mm.exe_path);
    record(out, 3, p);
    ++*count;
  }
  {
    Le p;
    p.u64(m.vdso.vdso_size);
    p.u64(m.vdso.vdso_hash);
    record(out, 4, p);
    ++*count;
  }
  for (const VmaRecord& v : m.vmas) {
    Le p;
    p.u64(v.start);
    p.u64(v.end);
    p.u32(v.prot);
    p.u32(v.flags);
    p.u64(v.pgoff);
    p.u64(v.dev);
    p.u64(v.ino);
    p.u64(v.file_size);
    p.u64(uint64_t(v.mtime_ns));
    p.str(v.name);
    if (v.advice) p.u32(v.advice);
    record(out, 5, p);
    ++*count;
  }
  for (const ThreadRecord& t : m.threads) {
    Le p;
    p.u32(uint32_t(t.tid));
    p.u32(uint32_t(t.pending_signal));
    for (uint64_t g : t.gpregs) p.u64(g);
    p.u32(uint32_t(t.xstate.size()));
    p.raw(t.xstate.data(), t.xstate.size());
    p.u64(t.rseq_ptr);
    p.u32(t.rseq_len);
    p.u32(t.rseq_sig);
    p.u64(t.sigmask);
    p.u64(t.restart_nr);
    p.u64(t.restart_rip);
    p.u64(t.altstack_sp);
    p.u64(t.altstack_size);
    p.u32(t.altstack_flags);
    p.u64(t.clear_child_tid);
    p.u64(t.robust_list);
    p.u64(t.robust_len);
    p.u32(uint32_t(t.pending.size()));
    for (const SigInfo& si : t.pending) p.raw(si.data(), 128);
    p.u32(uint32_t(t.seccomp.size()));
    for (const SeccompFilter& f : t.seccomp) {
      p.u64(f.flags);
      p.u32(uint32_t(f.instructions.size()));
      p.raw(f.instructions.data(), f.instructions.size());
    }
    record(out, 6, p);
    ++*count;
  }
  {
    const ProcessState& ps = m.state;
    Le p;
    p.u32(ps.has_rlimits ? 1 : 0);
    for (uint64_t v : ps.rlimits) p.u64(v);
    p.u32(ps.personality);
    p.u32(uint32_t(ps.dumpable));
    p.u32(uint32_t(ps.pdeathsig));
    p.u32(ps.no_new_privs ? 1 : 0);
    for (const TimerSetting& t : ps.itimers) {
      p.u64(t.interval_ns);
      p.u64(t.value_ns);
    }
    p.u32(uint32_t(ps.pending.size()));
    for (const SigInfo& si : ps.pending) p.raw(si.data(), 128);
    record(out, 20, p);
    ++*count;
  }
  for (const PosixTimer& t : m.state.timers) {
    Le p;
    for (int32_t v : {t.id, t.clock, t.notify, t.signo}) p.u32(uint32_t(v));
    p.u64(t.value);
    p.u32(uint32_t(t.notify_tid));
    p.u64(t.setting.interval_ns);
    p.u64(t.setting.value_ns);
    record(out, 21, p);
    ++*count;
  }
  for (const FileRecord& f : m.files) {
    Le p;
    p.u32(uint32_t(f.fd));
    p.u32(uint32_t(f.kind));
    p.u32(f.flags);
    p.u32(f.fd_flags);
    p.u64(f.offset);
    p.u64(f.dev);
    p.u64(f.ino);
    p.u64(f.size);
    p.u64(uint64_t(f.mtime_ns));
    p.str(f.path);
    // Appended fields, present only when one is not at its default.
    if (f.dup_of != -1 || !f.params.empty() || !f.data.empty()) {
      p.u32(uint32_t(f.dup_of));
      p.u32(uint32_t(f.params.size()));
      for (uint64_t v : f.params) p.u64(v);
      p.u32(uint32_t(f.data.size()));
      p.raw(f.data.data(), f.data.size());
    }
    record(out, 7, p);
    ++*count;
  }
  return out.b;
}

// The ChainLink record (type 22) of docs/format.md, appended last.
void spec_link_record(Le& out, const ImageMeta& m, uint64_t parent_digest,
                      const std::vector<uint8_t>& addr_file, uint64_t* count) {
  Le p;
  p.u64(m.generation);
  p.raw(m.chain_id.data(), 16);
  p.u64(m.parent_generation);
  p.u64(parent_digest);
  p.u64(ckpt::xxh3(addr_file.data(), addr_file.size()));
  record(out, 22, p);
  ++*count;
}

// Checks the common header of docs/format.md at the start of `b`.
void expect_header(const std::vector<uint8_t>& b, const char* magic_letter, uint32_t header_size,
                   uint64_t generation, const std::array<uint8_t, 16>& chain, uint64_t count,
                   uint32_t version = 2) {
  ASSERT_GE(b.size(), header_size);
  const uint8_t magic[8] = {0x89, 'C', 'K', 'P', 'T', uint8_t(magic_letter[0]), '\r', '\n'};
  EXPECT_EQ(std::memcmp(b.data(), magic, 8), 0) << "magic";
  EXPECT_EQ(le32(b, 8), version) << "version";
  EXPECT_EQ(le32(b, 12), header_size) << "header_size";
  EXPECT_EQ(le64(b, 16), generation) << "generation";
  EXPECT_EQ(std::memcmp(&b[24], chain.data(), 16), 0) << "chain_id";
  EXPECT_EQ(le64(b, 40), count) << "count";
  EXPECT_EQ(le64(b, 48), 0u) << "flags";
  std::vector<uint8_t> h(b.begin(), b.begin() + header_size);
  std::memset(&h[56], 0, 8);
  EXPECT_EQ(le64(b, 56), ckpt::xxh3(h.data(), h.size())) << "header_hash";
  for (size_t i = 64; i < header_size; ++i)
    if (b[i] != 0) {
      ADD_FAILURE() << "header padding byte " << i << " is not zero";
      break;
    }
}

TEST(FormatSpec, FilesAreLaidOutAsDocumented) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(31);
  const ImageMeta meta = ckpt::testing::make_meta(7, chain, 832);
  // Pages: N N Z N at 0x10000, then one zero page at 0x7f0000001000.
  AlignedBytes a(4 * kPageSize), z(kPageSize);
  for (int i : {0, 1, 3}) ckpt::testing::fill_page(&a[size_t(i) * kPageSize], uint64_t(i) + 100);
  auto w = SnapshotWriter::create(tmp.path(), 7, chain);
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_TRUE((*w)->add_pages(0x10000, a.data(), 4).ok());
  ASSERT_TRUE((*w)->add_pages(0x7f0000001000, z.data(), 1).ok());
  Status st = (*w)->commit(meta);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const std::string gen = tmp.path() + "/gen-000007";

  // pages.img: 4096-byte header, then the content of the non-zero runs.
  const std::vector<uint8_t> pages = read_bytes(gen + "/pages.img");
  expect_header(pages, "P", 4096, 7, chain, 3 * kPageSize);
  ASSERT_EQ(pages.size(), 4096 + 3 * kPageSize);
  EXPECT_EQ(std::memcmp(&pages[4096], &a[0], 2 * kPageSize), 0);
  EXPECT_EQ(std::memcmp(&pages[4096 + 2 * kPageSize], &a[3 * kPageSize], kPageSize), 0);

  // addr.img: 64-byte header, then 40-byte run records.
  const std::vector<uint8_t> addr = read_bytes(gen + "/addr.img");
  expect_header(addr, "A", 64, 7, chain, 4);
  ASSERT_EQ(addr.size(), 64u + 4 * 40);
  struct Want {
    uint64_t vaddr;
    uint32_t npages, flags;
    uint64_t offset;
    const uint8_t* content;
  } want[] = {{0x10000, 2, 0, 0, &a[0]},
              {0x12000, 1, 1, 0, nullptr},
              {0x13000, 1, 0, 2 * kPageSize, &a[3 * kPageSize]},
              {0x7f0000001000, 1, 1, 0, nullptr}};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE("run record " + std::to_string(i));
    const size_t r = 64 + i * 40;
    EXPECT_EQ(le64(addr, r + 0), want[i].vaddr);
    EXPECT_EQ(le32(addr, r + 8), want[i].npages);
    EXPECT_EQ(le32(addr, r + 12), want[i].flags);
    EXPECT_EQ(le64(addr, r + 16), want[i].offset);
    const uint64_t content_hash =
        want[i].content ? ckpt::xxh3(want[i].content, want[i].npages * kPageSize) : 0;
    EXPECT_EQ(le64(addr, r + 24), content_hash);
    EXPECT_EQ(le64(addr, r + 32), ckpt::xxh3(&addr[r], 32));
  }

  // meta.img: 64-byte header, then the record stream.
  const std::vector<uint8_t> m = read_bytes(gen + "/meta.img");
  uint64_t nrec = 0;
  Le full;
  full.b = spec_meta_stream(meta, &nrec);
  spec_link_record(full, meta, 0, addr, &nrec);
  const std::vector<uint8_t>& stream = full.b;
  EXPECT_EQ(nrec, 7 + meta.vmas.size() + meta.threads.size() + meta.state.timers.size() +
                      meta.files.size());
  expect_header(m, "M", 64, 7, chain, nrec);
  ASSERT_EQ(m.size(), 64 + stream.size());
  for (size_t i = 0; i < stream.size(); ++i)
    if (m[64 + i] != stream[i]) {
      ADD_FAILURE() << "meta.img differs from the specified encoding at byte " << 64 + i;
      break;
    }
}

// Appends records to a meta.img and fixes up its header (count and hash).
std::vector<uint8_t> with_extra_records(std::vector<uint8_t> meta, const Le& records, uint64_t n) {
  uint64_t count = le64(meta, 40) + n;
  std::memcpy(&meta[40], &count, 8);
  meta.insert(meta.end(), records.b.begin(), records.b.end());
  std::memset(&meta[56], 0, 8);
  uint64_t h = ckpt::xxh3(meta.data(), 64);
  std::memcpy(&meta[56], &h, 8);
  return meta;
}

TEST(FormatSpec, UnknownRecordTypesAreSkipped) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(32);
  const ImageMeta meta = ckpt::testing::make_meta(1, chain, 64);
  auto w = SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->commit(meta).ok());
  const std::string path = tmp.path() + "/gen-000001/meta.img";
  const std::vector<uint8_t> orig = read_bytes(path);

  Le extra;
  Le empty, big;
  record(extra, 0x100, empty);
  for (int i = 0; i < 1000; ++i) big.u8(uint8_t(i));
  record(extra, 0xffffffff, big);
  record(extra, 0, big);
  write_bytes(path, with_extra_records(orig, extra, 3));
  auto r = SnapshotReader::open(tmp.path() + "/gen-000001");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ckpt::testing::expect_meta_eq((*r)->meta(), meta);

  // An unknown record is still framed and checked: a bad hash is refused.
  Le bad;
  record(bad, 0x100, big);
  bad.b[20] ^= 1;
  write_bytes(path, with_extra_records(orig, bad, 1));
  auto r2 = SnapshotReader::open(tmp.path() + "/gen-000001");
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().code, EBADMSG);
}

// A known record longer than the fields this version knows: the rest of its
// payload is ignored (room to append fields within version 1).
TEST(FormatSpec, BytesAfterKnownFieldsOfARecordAreIgnored) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(33);
  ImageMeta meta = ckpt::testing::make_meta(1, chain, 64);
  const ImageMeta without_vdso = meta;
  auto w = SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->commit(meta).ok());
  const std::string path = tmp.path() + "/gen-000001/meta.img";
  // A second VDSO record (type 4) with extra bytes: the later record wins.
  Le p;
  p.u64(12288);
  p.u64(0x1122334455667788);
  p.u64(0xdeadbeef);  // a field from the future
  Le rec;
  record(rec, 4, p);
  write_bytes(path, with_extra_records(read_bytes(path), rec, 1));
  auto r = SnapshotReader::open(tmp.path() + "/gen-000001");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->meta().vdso.vdso_size, 12288u);
  EXPECT_EQ((*r)->meta().vdso.vdso_hash, 0x1122334455667788u);
}

// A File record as version-1 writers before the appended fields wrote it
// (ending with `path`) still reads, with the defaults; a record cut inside
// the appended fields is malformed.
// Vma's appended advice: absent (older images) reads as none; an advice bit
// docs/format.md does not define makes the record malformed.
TEST(FormatSpec, VmaAdviceIsOptionalAndChecked) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(35);
  ImageMeta meta = ckpt::testing::make_meta(1, chain, 64);
  meta.vmas.clear();
  auto w = SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->commit(meta).ok());
  const std::string path = tmp.path() + "/gen-000001/meta.img";
  const std::vector<uint8_t> orig = read_bytes(path);
  auto vma_record = [](std::optional<uint32_t> advice) {
    Le p;
    for (uint64_t v : {0x10000ull, 0x20000ull}) p.u64(v);
    p.u32(3);
    p.u32(0);
    for (int i = 0; i < 5; ++i) p.u64(0);
    p.str("");
    if (advice) p.u32(*advice);
    Le rec;
    record(rec, 5, p);
    return rec;
  };
  for (auto [advice, ok] : {std::pair<std::optional<uint32_t>, bool>{std::nullopt, true},
                            {kAdvWipeOnFork | kAdvRandom, true},
                            {1u << 20, false}}) {
    SCOPED_TRACE(advice ? std::to_string(*advice) : "absent");
    write_bytes(path, with_extra_records(orig, vma_record(advice), 1));
    auto r = SnapshotReader::open(tmp.path() + "/gen-000001");
    ASSERT_EQ(r.ok(), ok) << (r.ok() ? "" : r.error().message);
    if (ok) {
      EXPECT_EQ((*r)->meta().vmas.at(0).advice, advice.value_or(0));
    } else {
      EXPECT_NE(r.error().message.find("malformed"), std::string::npos) << r.error().message;
    }
  }
}

TEST(FormatSpec, FileRecordAppendedFieldsAreOptional) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(34);
  ImageMeta meta = ckpt::testing::make_meta(1, chain, 64);
  meta.files.clear();
  auto w = SnapshotWriter::create(tmp.path(), 1, chain);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->commit(meta).ok());
  const std::string path = tmp.path() + "/gen-000001/meta.img";
  const std::vector<uint8_t> orig = read_bytes(path);

  Le old_style;
  old_style.u32(5);
  old_style.u32(uint32_t(FileKind::kRegular));
  old_style.u32(O_RDONLY);
  old_style.u32(0);
  for (uint64_t v : {11ull, 22ull, 33ull, 44ull, 55ull}) old_style.u64(v);
  old_style.str("/old/file");
  Le rec;
  record(rec, 7, old_style);
  write_bytes(path, with_extra_records(orig, rec, 1));
  auto r = SnapshotReader::open(tmp.path() + "/gen-000001");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ((*r)->meta().files.size(), 1u);
  const FileRecord& f = (*r)->meta().files[0];
  EXPECT_EQ(f.fd, 5);
  EXPECT_EQ(f.offset, 11u);
  EXPECT_EQ(f.mtime_ns, 55);
  EXPECT_EQ(f.path, "/old/file");
  EXPECT_EQ(f.dup_of, -1);
  EXPECT_TRUE(f.params.empty());
  EXPECT_TRUE(f.data.empty());

  // dup_of and a params count of 2, but only one u64 follows.
  Le cut = old_style;
  cut.u32(3);
  cut.u32(2);
  cut.u64(7);
  Le rec2;
  record(rec2, 7, cut);
  write_bytes(path, with_extra_records(orig, rec2, 1));
  auto r2 = SnapshotReader::open(tmp.path() + "/gen-000001");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message.find("malformed"), std::string::npos) << r2.error().message;

  // A data length beyond the payload.
  Le big = old_style;
  big.u32(uint32_t(-1));
  big.u32(0);
  big.u32(100);
  big.u8(1);
  Le rec3;
  record(rec3, 7, big);
  write_bytes(path, with_extra_records(orig, rec3, 1));
  EXPECT_FALSE(SnapshotReader::open(tmp.path() + "/gen-000001").ok());
}

// ---- Golden version-1 generation ----------------------------------------

std::string golden_dir() {
  std::string f = __FILE__;
  return f.substr(0, f.rfind('/')) + "/golden/v1";
}

ImageMeta golden_meta() {
  ImageMeta m;
  m.generation = 1;
  m.parent_generation = 0;
  for (uint8_t i = 0; i < 16; ++i) m.chain_id[i] = uint8_t(0xc0 + i);
  m.created_unix_ns = 1735689600000000000;  // 2025-01-01T00:00:00Z
  m.kernel_release = "6.1.0-golden";
  m.process.pid = 4242;
  m.process.umask = 022;
  m.process.comm = "golden";
  m.process.cwd = "/home/golden dir";
  m.process.sigactions = {{2, 0x401100, 0x14000000, 0x7ffc10008000, 0},
                          {13, 1, 0x04000000, 0x7ffc10008000, 0}};
  m.mm.start_code = 0x400000;
  m.mm.end_code = 0x401000;
  m.mm.start_data = 0x402000;
  m.mm.end_data = 0x403000;
  m.mm.start_brk = 0x404000;
  m.mm.brk = 0x425000;
  m.mm.start_stack = 0x7ffc00000000;
  m.mm.arg_start = 0x7ffc00000100;
  m.mm.arg_end = 0x7ffc00000110;
  m.mm.env_start = 0x7ffc00000110;
  m.mm.env_end = 0x7ffc00000200;
  m.mm.auxv = {6, 4096, 25, 0x7ffc00000300, 0, 0};
  m.mm.exe_path = "/usr/bin/golden";
  m.vdso = {8192, 0x0123456789abcdef};
  VmaRecord text{
      0x400000,         0x401000, 5, kVmaFile, 0, 0xfe01, 12345, 4096, 1700000000000000000,
      "/usr/bin/golden"};
  VmaRecord heap{0x404000, 0x425000, 3, kVmaHeap, 0, 0, 0, 0, 0, "[heap]"};
  VmaRecord vvar{0x7ffc10000000, 0x7ffc10004000, 1, kVmaVvar, 0, 0, 0, 0, 0, "[vvar]"};
  VmaRecord vdso{0x7ffc10004000, 0x7ffc10006000, 5, kVmaVdso, 0, 0, 0, 0, 0, "[vdso]"};
  VmaRecord stack{0x7ffbfffdf000, 0x7ffc00001000, 3, kVmaGrowsDown, 0, 0, 0, 0, 0, "[stack]"};
  m.vmas = {text, heap, vvar, vdso, stack};
  ThreadRecord t;
  t.tid = 4242;
  t.pending_signal = 0;
  for (size_t i = 0; i < kGpRegWords; ++i) t.gpregs[i] = 0x1000 + i;
  t.xstate.assign(64, 0x5a);
  t.rseq_ptr = 0x7ffc00000400;
  t.rseq_len = 32;
  t.rseq_sig = 0x53053053;
  t.sigmask = 1ull << 9;
  m.threads = {t};
  FileRecord out{1, FileKind::kInheritStdio, 1, 0, 0, 0, 0, 0, 0, "/dev/pts/0"};
  FileRecord log{3, FileKind::kRegular, 02101, 1, 77, 0xfe01, 999, 77, 1, "/tmp/golden.log"};
  FileRecord null{4, FileKind::kCharDevice, 0, 0, 0, 0, 0, 0, 0, "/dev/null"};
  m.files = {out, log, null};
  return m;
}

// Heap pages: N Z N (two content pages); stack: one zero page.
void golden_pages(AlignedBytes* heap, AlignedBytes* stack) {
  *heap = AlignedBytes(3 * kPageSize);
  for (size_t i = 0; i < kPageSize; ++i) (*heap)[i] = uint8_t(i * 7 + 1);
  const char text[] = "libckpt golden page, format version 1. ";
  for (size_t i = 0; i < kPageSize; ++i) (*heap)[2 * kPageSize + i] = uint8_t(text[i % 39]);
  *stack = AlignedBytes(kPageSize);
}

Status write_golden(const std::string& dir) {
  const ImageMeta m = golden_meta();
  AlignedBytes heap, stack;
  golden_pages(&heap, &stack);
  auto w = SnapshotWriter::create(dir, m.generation, m.chain_id);
  if (!w.ok()) return w.error();
  CKPT_TRY((*w)->add_pages(0x404000, heap.data(), 3));
  CKPT_TRY((*w)->add_pages(0x7ffc00000000, stack.data(), 1));
  return (*w)->commit(m);
}

// Regenerate (only on an intended format change, with a version bump):
//   CKPT_WRITE_GOLDEN=1 unit_tests --gtest_filter='FormatSpec.Golden*'
TEST(FormatSpec, GoldenVersion1ReadsBack) {
  if (std::getenv("CKPT_WRITE_GOLDEN")) {
    const std::string parent = golden_dir().substr(0, golden_dir().rfind('/'));
    ASSERT_TRUE(ensure_dir(parent).ok());
    ASSERT_TRUE(ensure_dir(golden_dir()).ok());
    if (::access((golden_dir() + "/gen-000001").c_str(), F_OK) == 0)
      GTEST_SKIP() << "remove " << golden_dir() << "/gen-000001 first";
    Status st = write_golden(golden_dir());
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
  const std::string gen = golden_dir() + "/gen-000001";
  auto r = SnapshotReader::open(gen);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ckpt::testing::expect_meta_eq((*r)->meta(), golden_meta());
  AlignedBytes heap, stack;
  golden_pages(&heap, &stack);
  const auto& runs = (*r)->runs();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].vaddr, 0x404000u);
  EXPECT_FALSE(runs[0].zero());
  EXPECT_EQ(std::memcmp((*r)->content(runs[0]), &heap[0], kPageSize), 0);
  EXPECT_EQ(runs[1].vaddr, 0x405000u);
  EXPECT_TRUE(runs[1].zero());
  EXPECT_EQ(runs[2].vaddr, 0x406000u);
  EXPECT_EQ(std::memcmp((*r)->content(runs[2]), &heap[2 * kPageSize], kPageSize), 0);
  EXPECT_EQ(runs[3].vaddr, 0x7ffc00000000u);
  EXPECT_TRUE(runs[3].zero());
  EXPECT_TRUE((*r)->verify_all().ok());
}

// golden/v1 is the first version-1 image and golden/v1-current the last one
// version-1 writers produced (thread records had gained appended fields):
// both must keep reading back.
TEST(FormatSpec, GoldenVersion1CurrentReadsBack) {
  auto r = SnapshotReader::open(golden_dir() + "-current/gen-000001");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->format_version(), 1u);
  EXPECT_FALSE((*r)->meta().link.present);
  ckpt::testing::expect_meta_eq((*r)->meta(), golden_meta());
  EXPECT_TRUE((*r)->verify_all().ok());
  auto chain = open_chain(golden_dir() + "-current", 1);
  EXPECT_TRUE(chain.ok()) << chain.error().message;
}

// Version 2: a full and an incremental on it (one heap page rewritten), linked.
std::string golden_v2_dir() {
  std::string f = __FILE__;
  return f.substr(0, f.rfind('/')) + "/golden/v2";
}

ImageMeta golden_meta_2() {
  ImageMeta m = golden_meta();
  m.generation = 2;
  m.parent_generation = 1;
  m.created_unix_ns += 1000000000;
  return m;
}

Status write_golden_v2(const std::string& dir) {
  CKPT_TRY(write_golden(dir));
  auto first = SnapshotReader::open(dir + "/gen-000001");
  if (!first.ok()) return first.error();
  ImageMeta m = golden_meta_2();
  m.link.parent_digest = (*first)->meta_digest();
  AlignedBytes page(kPageSize);
  for (size_t i = 0; i < kPageSize; ++i) page[i] = uint8_t(i * 13 + 5);
  auto w = SnapshotWriter::create(dir, 2, m.chain_id);
  if (!w.ok()) return w.error();
  CKPT_TRY((*w)->add_pages(0x405000, page.data(), 1));
  return (*w)->commit(m);
}

// Regenerate (only with a version bump): CKPT_WRITE_GOLDEN_V2=1 unit_tests
// --gtest_filter='FormatSpec.GoldenVersion2*' (remove golden/v2 first).
TEST(FormatSpec, GoldenVersion2IsWhatTheWriterProduces) {
  if (std::getenv("CKPT_WRITE_GOLDEN_V2")) {
    ASSERT_TRUE(ensure_dir(golden_v2_dir()).ok());
    if (::access((golden_v2_dir() + "/gen-000001").c_str(), F_OK) == 0)
      GTEST_SKIP() << "remove " << golden_v2_dir() << " first";
    ASSERT_TRUE(write_golden_v2(golden_v2_dir()).ok());
  }
  TempDir tmp;
  Status st = write_golden_v2(tmp.path());
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (const char* g : {"gen-000001", "gen-000002"})
    for (const char* f : {kPagesFile, kAddrFile, kMetaFile}) {
      SCOPED_TRACE(std::string(g) + "/" + f);
      const std::vector<uint8_t> golden = read_bytes(golden_v2_dir() + "/" + g + "/" + f);
      const std::vector<uint8_t> now = read_bytes(tmp.path() + "/" + g + "/" + f);
      EXPECT_EQ(now.size(), golden.size());
      EXPECT_TRUE(now == golden) << "no longer matches the golden version-2 file";
    }
  auto chain = open_chain(golden_v2_dir(), 2);
  ASSERT_TRUE(chain.ok()) << chain.error().message;
  ASSERT_EQ(chain->links.size(), 2u);
  ckpt::testing::expect_meta_eq(chain->newest(), golden_meta_2());
  EXPECT_TRUE(chain->newest().link.present);
  EXPECT_EQ(chain->newest().link.parent_digest, chain->links[1]->meta_digest());
}

// ---- An independent reader, written from docs/format.md alone ------------

struct SpecRun {
  uint64_t vaddr = 0;
  uint32_t npages = 0, flags = 0;
  uint64_t offset = 0, hash = 0;
};

struct SpecGeneration {
  uint32_t version = 0;
  uint64_t generation = 0, parent = 0;
  std::array<uint8_t, 16> chain{};
  std::vector<uint32_t> record_types;
  bool has_link = false;
  uint64_t link_parent_digest = 0;
  uint64_t meta_digest = 0;  // xxh3 of the whole meta.img
  std::vector<SpecRun> runs;
};

// Reads the common header; "" or why the file is not valid.
std::string spec_header(const std::vector<uint8_t>& b, char letter, uint32_t* version,
                        uint32_t* hsize, uint64_t* gen, std::array<uint8_t, 16>* chain,
                        uint64_t* count, uint64_t* flags) {
  const uint8_t magic[8] = {0x89, 'C', 'K', 'P', 'T', uint8_t(letter), '\r', '\n'};
  if (b.size() < 64 || std::memcmp(b.data(), magic, 8) != 0) return "magic";
  *version = le32(b, 8);
  if (*version != 1 && *version != 2) return "version";
  *hsize = le32(b, 12);
  if (*hsize < 64 || *hsize > 4096 || b.size() < *hsize) return "header size";
  std::vector<uint8_t> h(b.begin(), b.begin() + *hsize);
  std::memset(&h[56], 0, 8);
  if (le64(b, 56) != ckpt::xxh3(h.data(), h.size())) return "header hash";
  *gen = le64(b, 16);
  std::memcpy(chain->data(), &b[24], 16);
  *count = le64(b, 40);
  *flags = le64(b, 48);
  return "";
}

std::string spec_read(const std::string& dir, SpecGeneration* out) {
  const std::vector<uint8_t> meta = read_bytes(dir + "/meta.img");
  const std::vector<uint8_t> addr = read_bytes(dir + "/addr.img");
  const std::vector<uint8_t> pages = read_bytes(dir + "/pages.img");
  uint32_t v[3], hs[3];
  uint64_t g[3], n[3], fl[3];
  std::array<uint8_t, 16> c[3];
  const std::vector<uint8_t>* files[3] = {&meta, &addr, &pages};
  const char letters[3] = {'M', 'A', 'P'};
  for (int i = 0; i < 3; ++i)
    if (std::string e =
            spec_header(*files[i], letters[i], &v[i], &hs[i], &g[i], &c[i], &n[i], &fl[i]);
        !e.empty())
      return std::string(1, letters[i]) + ": " + e;
  if (v[0] != v[1] || v[0] != v[2] || g[0] != g[1] || g[0] != g[2] || c[0] != c[1] || c[0] != c[2])
    return "headers disagree";
  if (fl[0] != 0 || fl[2] != 0 || (fl[1] & ~1ull)) return "header flags";
  out->version = v[0];
  out->generation = g[0];
  out->chain = c[0];
  out->meta_digest = ckpt::xxh3(meta.data(), meta.size());
  // meta.img: framed records up to the end of the file.
  size_t off = hs[0];
  for (uint64_t i = 0; i < n[0]; ++i) {
    if (meta.size() - off < 16) return "meta truncated";
    const uint32_t type = le32(meta, off), len = le32(meta, off + 4);
    if (meta.size() - off - 16 < len) return "meta truncated";
    if (le64(meta, off + 8 + len) != ckpt::xxh3(&meta[off], 8 + len)) return "record hash";
    out->record_types.push_back(type);
    if (type == 1) {
      if (len < 40 || le64(meta, off + 8) != g[0]) return "generation record";
      out->parent = le64(meta, off + 16);
    } else if (type == 22) {
      if (len < 48 || le64(meta, off + 8) != g[0] ||
          std::memcmp(&meta[off + 16], c[0].data(), 16) || le64(meta, off + 32) != out->parent ||
          le64(meta, off + 48) != ckpt::xxh3(addr.data(), addr.size()))
        return "chain link";
      out->has_link = true;
      out->link_parent_digest = le64(meta, off + 40);
    }
    off += 16 + len;
  }
  if (off != meta.size()) return "meta trailing bytes";
  if (out->version >= 2 && !out->has_link) return "no chain link";
  // addr.img: run records, then the page-hash table when flags bit 0 is set.
  if (addr.size() < hs[1] + 40 * n[1]) return "addr size";
  uint64_t covered = 0;
  for (uint64_t i = 0; i < n[1]; ++i) {
    const size_t r = hs[1] + 40 * i;
    if (le64(addr, r + 32) != ckpt::xxh3(&addr[r], 32)) return "run hash";
    SpecRun run{le64(addr, r), le32(addr, r + 8), le32(addr, r + 12), le64(addr, r + 16),
                le64(addr, r + 24)};
    if (run.npages < 1 || run.npages > 256 || run.vaddr % 4096) return "run range";
    if (!(run.flags & 1)) {
      if (run.offset % 4096 || run.offset + run.npages * 4096ull > n[2]) return "run range";
      if (ckpt::xxh3(&pages[4096 + run.offset], run.npages * 4096ull) != run.hash)
        return "content hash";
      covered += run.npages * 4096ull;
    }
    out->runs.push_back(run);
  }
  const size_t table = hs[1] + 40 * n[1];
  if (fl[1] & 1) {
    if (addr.size() - table < 16) return "page-hash table";
    const uint64_t m = le64(addr, table);
    if (addr.size() - table != 16 + 16 * m ||
        le64(addr, addr.size() - 8) != ckpt::xxh3(&addr[table], 8 + 16 * m))
      return "page-hash table";
  } else if (addr.size() != table) {
    return "addr size";
  }
  if (pages.size() != 4096 + n[2] || covered != n[2]) return "pages size";
  return "";
}

// Every image the tests keep, and what today's writer produces, reads with
// the independent reader, which agrees with SnapshotReader on what it found.
TEST(FormatSpec, IndependentReaderReadsEveryImage) {
  TempDir tmp;
  const auto chain = ckpt::testing::make_chain_id(40);
  ASSERT_TRUE(write_golden_v2(tmp.path() + "").ok());
  const std::string written = tmp.path() + "/written";
  ASSERT_TRUE(ensure_dir(written).ok());
  {
    auto w = SnapshotWriter::create(written, 3, chain);
    ASSERT_TRUE(w.ok());
    AlignedBytes a(2 * kPageSize);
    ckpt::testing::fill_page(&a[0], 9);
    ASSERT_TRUE((*w)->add_pages(0x20000, a.data(), 2).ok());
    (*w)->set_page_hashes({{0x20000, 1}, {0x21000, 2}});
    ImageMeta m = ckpt::testing::make_meta(3, chain, 200);
    m.link.parent_digest = 0x1234;  // its parent is not here: only the record is read
    ASSERT_TRUE((*w)->commit(m).ok());
  }
  const std::vector<std::string> dirs = {
      golden_dir() + "/gen-000001",    golden_dir() + "-current/gen-000001",
      golden_v2_dir() + "/gen-000001", golden_v2_dir() + "/gen-000002",
      tmp.path() + "/gen-000001",      tmp.path() + "/gen-000002",
      written + "/gen-000003"};
  std::map<std::string, uint64_t> digests;
  for (const std::string& d : dirs) {
    SCOPED_TRACE(d);
    SpecGeneration sg;
    EXPECT_EQ(spec_read(d, &sg), "");
    auto r = SnapshotReader::open(d);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(sg.version, (*r)->format_version());
    EXPECT_EQ(sg.generation, (*r)->meta().generation);
    EXPECT_EQ(sg.parent, (*r)->meta().parent_generation);
    EXPECT_EQ(sg.has_link, (*r)->meta().link.present);
    EXPECT_EQ(sg.meta_digest, (*r)->meta_digest());
    ASSERT_EQ(sg.runs.size(), (*r)->runs().size());
    for (size_t i = 0; i < sg.runs.size(); ++i) {
      EXPECT_EQ(sg.runs[i].vaddr, (*r)->runs()[i].vaddr);
      EXPECT_EQ(sg.runs[i].hash, (*r)->runs()[i].content_hash);
    }
    digests[d] = sg.meta_digest;
    const std::string parent = d.substr(0, d.rfind('/')) + "/gen-000001";
    if (sg.parent && ::access(parent.c_str(), F_OK) == 0) {  // the link names its meta.img digest
      SpecGeneration ps;
      ASSERT_EQ(spec_read(parent, &ps), "");
      EXPECT_EQ(sg.link_parent_digest, ps.meta_digest);
    }
  }
}

}  // namespace
}  // namespace ckpt::image
