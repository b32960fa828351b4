// Helpers shared by the snapshot format tests: a self-removing temporary
// directory, a realistic ImageMeta, raw file access and field-by-field
// comparison of metadata.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "image/model.hpp"
#include "image/store.hpp"
#include "image/writer.hpp"

namespace ckpt::testing {

// mkdtemp() directory, removed recursively when the object goes away.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ckpt-unit-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << tmpl << ": " << std::strerror(errno);
      return;
    }
    path_ = buf.data();
  }
  ~TempDir() {
    if (path_.empty()) return;
    ::nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
        FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Zero-filled, page-aligned bytes: what the checkpoint code hands to
// SnapshotWriter::add_pages (the writer may use O_DIRECT on pages.img).
class AlignedBytes {
 public:
  explicit AlignedBytes(size_t n = 0) : n_(n) {
    if (n == 0) return;
    p_ = static_cast<uint8_t*>(std::aligned_alloc(image::kPageSize, n));
    std::memset(p_, 0, n);
  }
  AlignedBytes(const AlignedBytes& o) : AlignedBytes(o.n_) {
    if (n_) std::memcpy(p_, o.p_, n_);
  }
  AlignedBytes(AlignedBytes&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  AlignedBytes& operator=(AlignedBytes o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~AlignedBytes() { std::free(p_); }
  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  uint8_t& operator[](size_t i) { return p_[i]; }
  const uint8_t& operator[](size_t i) const { return p_[i]; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

// Names in a directory, "." and ".." excluded, sorted.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return out;
  while (dirent* e = ::readdir(d.get())) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::vector<uint8_t> out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    ADD_FAILURE() << "cannot open " << path;
    return out;
  }
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return out;
}

// Replaces the file's content (keeping its mode, as the inode stays the same).
inline void write_bytes(const std::string& path, const std::vector<uint8_t>& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    ASSERT_GT(n, 0) << path << ": " << std::strerror(errno);
    off += size_t(n);
  }
  ::close(fd);
}

// Creates a new file (0600) holding `data`.
inline void write_bytes_new(const std::string& path, const std::vector<uint8_t>& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  ::close(fd);
  write_bytes(path, data);
}

inline std::array<uint8_t, 16> make_chain_id(uint8_t seed) {
  std::array<uint8_t, 16> id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = uint8_t(seed * 31 + i * 7 + 1);
  return id;
}

// A metadata block as a real checkpoint of a small dynamically linked
// program would produce it, with long strings and every kind of record.
inline image::ImageMeta make_meta(uint64_t generation, const std::array<uint8_t, 16>& chain_id,
                                  size_t xstate_size = 2696) {
  using namespace image;
  ImageMeta m;
  m.generation = generation;
  m.parent_generation = generation > 1 ? generation - 1 : 0;
  m.chain_id = chain_id;
  m.created_unix_ns = 1717171717123456789;
  m.kernel_release = "6.1.0-21-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.90-1 (2024-05-03)";
  m.process.pid = 424242;
  m.process.umask = 027;
  m.process.comm = "heap pattern";
  constexpr uint64_t kSaRestorer = 0x04000000;  // not exported by glibc's headers
  m.process.sigactions = {
      {SIGINT, 0x555555555189, kSaRestorer | SA_RESTART, 0x7ffff7e08050, 1ull << (SIGTERM - 1)},
      {SIGPIPE, 1 /* SIG_IGN */, kSaRestorer, 0x7ffff7e08050, 0},
      {SIGCHLD, 0x5555555551f0, kSaRestorer | SA_SIGINFO | SA_NOCLDSTOP, 0x7ffff7e08050, ~0ull},
      {37 /* SIGRTMIN + 3 */, 0x555555555200, kSaRestorer | SA_ONSTACK, 0x7ffff7e08050, 0}};
  m.process.cwd =
      "/home/user/some directory with spaces/" + std::string(300, 'd') + "/\xc3\xa9t\xc3\xa9";
  m.mm.start_code = 0x555555554000;
  m.mm.end_code = 0x555555556000;
  m.mm.start_data = 0x555555557000;
  m.mm.end_data = 0x555555558010;
  m.mm.start_brk = 0x555555559000;
  m.mm.brk = 0x55555557a000;
  m.mm.start_stack = 0x7ffffffde000;
  m.mm.arg_start = 0x7fffffffe3a0;
  m.mm.arg_end = 0x7fffffffe3c0;
  m.mm.env_start = 0x7fffffffe3c0;
  m.mm.env_end = 0x7fffffffefe0;
  m.mm.auxv = {33, 0x7ffff7fc1000,
               16, 0x178bfbff,
               6,  4096,
               17, 100,
               3,  0x555555554040,
               4,  56,
               5,  13,
               7,  0x7ffff7fc3000,
               8,  0,
               9,  0x555555555060,
               11, 1000,
               12, 1000,
               13, 1000,
               14, 1000,
               23, 0,
               25, 0x7fffffffe389,
               26, 2,
               31, 0x7fffffffefe0,
               15, 0x7fffffffe399,
               0,  0};
  m.mm.exe_path = "/usr/lib/very/long/path/" + std::string(400, 'x') + "/heap pattern (deleted)";
  m.vdso.vdso_size = 8192;
  m.vdso.vdso_hash = 0xfedcba9876543210;

  auto vma = [](uint64_t s, uint64_t e, uint32_t prot, uint32_t flags, std::string name) {
    VmaRecord v;
    v.start = s;
    v.end = e;
    v.prot = prot;
    v.flags = flags;
    v.name = std::move(name);
    return v;
  };
  VmaRecord text =
      vma(0x555555554000, 0x555555556000, PROT_READ | PROT_EXEC, kVmaFile, "/usr/bin/heap pattern");
  text.pgoff = 0x1000;
  text.dev = 0xfe01;
  text.ino = 1835043;
  text.file_size = 16384;
  text.mtime_ns = -5;  // signed on purpose
  m.vmas.push_back(text);
  m.vmas.push_back(vma(0x555555559000, 0x55555557a000, PROT_READ | PROT_WRITE, kVmaHeap, "[heap]"));
  VmaRecord libc = vma(0x7ffff7dd0000, 0x7ffff7f25000, PROT_READ | PROT_EXEC, kVmaFile,
                       "/usr/lib/x86_64-linux-gnu/libc.so.6");
  libc.pgoff = 0x28000;
  libc.dev = 0x10300002;
  libc.ino = 0xffffffffffffff01ull;
  libc.file_size = 1922136;
  libc.mtime_ns = 1700000000123456789;
  m.vmas.push_back(libc);
  VmaRecord shm = vma(0x7ffff7fb0000, 0x7ffff7fb4000, PROT_READ | PROT_WRITE,
                      kVmaShared | kVmaFile | kVmaMayWrite, "/dev/shm/ring buffer (deleted)");
  shm.ino = 77;
  shm.file_size = 16384;
  m.vmas.push_back(shm);
  m.vmas.push_back(vma(0x7ffff7fb8000, 0x7ffff7fbc000, PROT_READ, kVmaVvar, "[vvar_vclock]"));
  m.vmas.push_back(vma(0x7ffff7fc1000, 0x7ffff7fc3000, PROT_READ | PROT_EXEC, kVmaVdso, "[vdso]"));
  VmaRecord anon = vma(0x7ffff7fc4000, 0x7ffff7fc8000, PROT_READ | PROT_WRITE, 0, "");
  anon.advice = kAdvHugePage | kAdvDontFork;
  m.vmas.push_back(anon);
  m.vmas.push_back(
      vma(0x7ffffffde000, 0x7ffffffff000, PROT_READ | PROT_WRITE, kVmaGrowsDown, "[stack]"));

  ThreadRecord t;
  t.tid = 424242;
  t.pending_signal = 10;
  for (size_t i = 0; i < kGpRegWords; ++i) t.gpregs[i] = 0x0101010101010101ull * (i + 1) + i;
  t.gpregs[15] = ~0ull;  // orig_rax = -1
  t.xstate.resize(xstate_size);
  for (size_t i = 0; i < t.xstate.size(); ++i) t.xstate[i] = uint8_t(i * 13 + 5);
  t.rseq_ptr = 0x7ffff7d8a9e0;
  t.rseq_len = 32;
  t.rseq_sig = 0x53053053;
  t.sigmask = (1ull << (SIGUSR1 - 1)) | (1ull << 63);
  t.altstack_sp = 0x7ffff7a00000;
  t.altstack_size = 65536;
  t.altstack_flags = 0;
  t.clear_child_tid = 0x7ffff7d8a910;
  t.robust_list = 0x7ffff7d8a920;
  t.robust_len = 24;
  SigInfo si{};
  si[0] = SIGUSR2;
  si[8] = 0xfa;  // si_code SI_QUEUE (-6 as a byte pattern is enough here)
  t.pending.push_back(si);
  SeccompFilter filter;
  filter.flags = 1;
  filter.instructions.assign(3 * 8, 0x11);
  t.seccomp.push_back(filter);
  m.threads.push_back(t);
  ThreadRecord worker = t;
  worker.tid = 424243;
  worker.pending.clear();
  worker.altstack_flags = 2;  // SS_DISABLE
  m.threads.push_back(worker);

  m.state.has_rlimits = true;
  for (size_t i = 0; i < m.state.rlimits.size(); ++i) m.state.rlimits[i] = ~0ull - i;
  m.state.personality = 0x0040000;
  m.state.dumpable = 0;
  m.state.pdeathsig = SIGTERM;
  m.state.no_new_privs = true;
  m.state.itimers[0] = {100000000, 55000000};
  SigInfo shared{};
  shared[0] = SIGHUP;
  m.state.pending.push_back(shared);
  PosixTimer pt;
  pt.id = 3;
  pt.clock = 1;
  pt.notify = 4;  // SIGEV_THREAD_ID
  pt.signo = SIGRTMIN;
  pt.value = 0xabcdef;
  pt.notify_tid = 424243;
  pt.setting = {1000000, 999};
  m.state.timers.push_back(pt);

  auto file = [](int32_t fd, FileKind kind, uint32_t flags, std::string path) {
    FileRecord f;
    f.fd = fd;
    f.kind = kind;
    f.flags = flags;
    f.path = std::move(path);
    return f;
  };
  m.files.push_back(file(0, FileKind::kInheritStdio, O_RDWR, "/dev/pts/3"));
  m.files.push_back(file(1, FileKind::kInheritStdio, O_WRONLY, "pipe:[123456]"));
  FileRecord reg = file(3, FileKind::kRegular, O_RDWR | O_APPEND | O_LARGEFILE,
                        "/var/tmp/out file with spaces " + std::string(1000, 'f') + ".log");
  reg.fd_flags = FD_CLOEXEC;
  reg.offset = 0x123456789;
  reg.dev = 0xfe01;
  reg.ino = 987654321;
  reg.size = 0x200000000;
  reg.mtime_ns = 1711111111000000001;
  m.files.push_back(reg);
  m.files.push_back(file(7, FileKind::kCharDevice, O_RDONLY, "/dev/urandom"));
  // Kinds with appended fields (dup_of, params, data).
  FileRecord dup = reg;
  dup.fd = 8;
  dup.dup_of = 3;
  m.files.push_back(dup);
  FileRecord del = file(9, FileKind::kDeleted, O_RDWR, "/tmp/scratch file");
  del.offset = 5000;
  del.ino = 4444;
  del.size = 3000;
  del.params = {0640, 1000, 1000};
  for (int i = 0; i < 3000; ++i) del.data.push_back(uint8_t(i * 7));
  m.files.push_back(del);
  FileRecord pr = file(10, FileKind::kPipe, O_RDONLY | O_NONBLOCK, "pipe:[777]");
  pr.ino = 777;
  pr.params = {65536};
  pr.data = {'u', 'n', 'r', 'e', 'a', 'd', 0, 0xff};
  m.files.push_back(pr);
  FileRecord pw = file(11, FileKind::kPipe, O_WRONLY, "pipe:[777]");
  pw.ino = 777;
  pw.params = {65536};
  m.files.push_back(pw);
  FileRecord ev = file(12, FileKind::kEventfd, O_RDWR, "anon_inode:[eventfd]");
  ev.params = {0xfffffffffffffffeull, 1};
  m.files.push_back(ev);
  FileRecord tf = file(13, FileKind::kTimerfd, O_RDWR, "anon_inode:[timerfd]");
  tf.params = {1, 1, 4696813512, 100000000, 3, 0x7fffffffffffffffull};
  m.files.push_back(tf);
  FileRecord sf = file(14, FileKind::kSignalfd, O_RDWR, "anon_inode:[signalfd]");
  sf.params = {0x0000000800000200ull};
  m.files.push_back(sf);
  FileRecord ep = file(15, FileKind::kEpoll, O_RDWR, "anon_inode:[eventpoll]");
  ep.params = {12, 0x80000019, 0x1122334455667788ull, 13, 1, ~0ull};
  m.files.push_back(ep);
  FileRecord mfd = file(16, FileKind::kMemfd, O_RDWR | O_LARGEFILE, "/memfd:ring buffer");
  mfd.params = {0777, 0, 0, 0x1 | 0x4};
  mfd.data.assign(8192, 0xab);
  m.files.push_back(mfd);
  return m;
}

inline void expect_meta_eq(const image::ImageMeta& a, const image::ImageMeta& b) {
  EXPECT_EQ(a.generation, b.generation);
  EXPECT_EQ(a.parent_generation, b.parent_generation);
  EXPECT_EQ(a.chain_id, b.chain_id);
  EXPECT_EQ(a.created_unix_ns, b.created_unix_ns);
  EXPECT_EQ(a.kernel_release, b.kernel_release);
  EXPECT_EQ(a.process.pid, b.process.pid);
  EXPECT_EQ(a.process.umask, b.process.umask);
  EXPECT_EQ(a.process.comm, b.process.comm);
  EXPECT_EQ(a.process.cwd, b.process.cwd);
  ASSERT_EQ(a.process.sigactions.size(), b.process.sigactions.size());
  for (size_t i = 0; i < a.process.sigactions.size(); ++i) {
    SCOPED_TRACE("sigaction " + std::to_string(i));
    const image::SignalAction &x = a.process.sigactions[i], &y = b.process.sigactions[i];
    EXPECT_EQ(x.signo, y.signo);
    EXPECT_EQ(x.handler, y.handler);
    EXPECT_EQ(x.flags, y.flags);
    EXPECT_EQ(x.restorer, y.restorer);
    EXPECT_EQ(x.mask, y.mask);
  }
  EXPECT_EQ(a.mm.start_code, b.mm.start_code);
  EXPECT_EQ(a.mm.end_code, b.mm.end_code);
  EXPECT_EQ(a.mm.start_data, b.mm.start_data);
  EXPECT_EQ(a.mm.end_data, b.mm.end_data);
  EXPECT_EQ(a.mm.start_brk, b.mm.start_brk);
  EXPECT_EQ(a.mm.brk, b.mm.brk);
  EXPECT_EQ(a.mm.start_stack, b.mm.start_stack);
  EXPECT_EQ(a.mm.arg_start, b.mm.arg_start);
  EXPECT_EQ(a.mm.arg_end, b.mm.arg_end);
  EXPECT_EQ(a.mm.env_start, b.mm.env_start);
  EXPECT_EQ(a.mm.env_end, b.mm.env_end);
  EXPECT_EQ(a.mm.auxv, b.mm.auxv);
  EXPECT_EQ(a.mm.exe_path, b.mm.exe_path);
  EXPECT_EQ(a.vdso.vdso_size, b.vdso.vdso_size);
  EXPECT_EQ(a.vdso.vdso_hash, b.vdso.vdso_hash);
  ASSERT_EQ(a.vmas.size(), b.vmas.size());
  for (size_t i = 0; i < a.vmas.size(); ++i) {
    SCOPED_TRACE("vma " + std::to_string(i));
    const image::VmaRecord &x = a.vmas[i], &y = b.vmas[i];
    EXPECT_EQ(x.start, y.start);
    EXPECT_EQ(x.end, y.end);
    EXPECT_EQ(x.prot, y.prot);
    EXPECT_EQ(x.flags, y.flags);
    EXPECT_EQ(x.pgoff, y.pgoff);
    EXPECT_EQ(x.dev, y.dev);
    EXPECT_EQ(x.ino, y.ino);
    EXPECT_EQ(x.file_size, y.file_size);
    EXPECT_EQ(x.mtime_ns, y.mtime_ns);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.advice, y.advice);
  }
  ASSERT_EQ(a.threads.size(), b.threads.size());
  for (size_t i = 0; i < a.threads.size(); ++i) {
    SCOPED_TRACE("thread " + std::to_string(i));
    const image::ThreadRecord &x = a.threads[i], &y = b.threads[i];
    EXPECT_EQ(x.tid, y.tid);
    EXPECT_EQ(x.pending_signal, y.pending_signal);
    EXPECT_EQ(x.gpregs, y.gpregs);
    EXPECT_EQ(x.xstate, y.xstate);
    EXPECT_EQ(x.rseq_ptr, y.rseq_ptr);
    EXPECT_EQ(x.rseq_len, y.rseq_len);
    EXPECT_EQ(x.rseq_sig, y.rseq_sig);
    EXPECT_EQ(x.sigmask, y.sigmask);
    EXPECT_EQ(x.altstack_sp, y.altstack_sp);
    EXPECT_EQ(x.altstack_size, y.altstack_size);
    EXPECT_EQ(x.altstack_flags, y.altstack_flags);
    EXPECT_EQ(x.clear_child_tid, y.clear_child_tid);
    EXPECT_EQ(x.robust_list, y.robust_list);
    EXPECT_EQ(x.robust_len, y.robust_len);
    EXPECT_EQ(x.pending, y.pending);
    ASSERT_EQ(x.seccomp.size(), y.seccomp.size());
    for (size_t f = 0; f < x.seccomp.size(); ++f) {
      EXPECT_EQ(x.seccomp[f].flags, y.seccomp[f].flags);
      EXPECT_EQ(x.seccomp[f].instructions, y.seccomp[f].instructions);
    }
  }
  EXPECT_EQ(a.state.has_rlimits, b.state.has_rlimits);
  EXPECT_EQ(a.state.rlimits, b.state.rlimits);
  EXPECT_EQ(a.state.personality, b.state.personality);
  EXPECT_EQ(a.state.dumpable, b.state.dumpable);
  EXPECT_EQ(a.state.pdeathsig, b.state.pdeathsig);
  EXPECT_EQ(a.state.no_new_privs, b.state.no_new_privs);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a.state.itimers[i].interval_ns, b.state.itimers[i].interval_ns);
    EXPECT_EQ(a.state.itimers[i].value_ns, b.state.itimers[i].value_ns);
  }
  EXPECT_EQ(a.state.pending, b.state.pending);
  ASSERT_EQ(a.state.timers.size(), b.state.timers.size());
  for (size_t i = 0; i < a.state.timers.size(); ++i) {
    const image::PosixTimer &x = a.state.timers[i], &y = b.state.timers[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.clock, y.clock);
    EXPECT_EQ(x.notify, y.notify);
    EXPECT_EQ(x.signo, y.signo);
    EXPECT_EQ(x.value, y.value);
    EXPECT_EQ(x.notify_tid, y.notify_tid);
    EXPECT_EQ(x.setting.interval_ns, y.setting.interval_ns);
    EXPECT_EQ(x.setting.value_ns, y.setting.value_ns);
  }
  ASSERT_EQ(a.files.size(), b.files.size());
  for (size_t i = 0; i < a.files.size(); ++i) {
    SCOPED_TRACE("file " + std::to_string(i));
    const image::FileRecord &x = a.files[i], &y = b.files[i];
    EXPECT_EQ(x.fd, y.fd);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.flags, y.flags);
    EXPECT_EQ(x.fd_flags, y.fd_flags);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(x.dev, y.dev);
    EXPECT_EQ(x.ino, y.ino);
    EXPECT_EQ(x.size, y.size);
    EXPECT_EQ(x.mtime_ns, y.mtime_ns);
    EXPECT_EQ(x.path, y.path);
    EXPECT_EQ(x.dup_of, y.dup_of);
    EXPECT_EQ(x.params, y.params);
    EXPECT_EQ(x.data, y.data);
  }
}

// A page whose bytes depend on (seed, index) and that is never all zero.
inline void fill_page(uint8_t* p, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < image::kPageSize; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  p[0] |= 1;
}

}  // namespace ckpt::testing
