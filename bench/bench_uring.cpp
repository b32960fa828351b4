// io_uring against the page file's current I/O paths (docs/performance.md,
// "io_uring for the page file"; issue 14 item 7).
//
//   bench_uring [--mib N] [--dir DIR] [--reps R] [--qd Q] [--batch-mib B]
//
// Write (what cr_full's writer thread does with captured memory): N MiB
// (default 1024) of incompressible memory into DIR/bench-uring.img (DIR
// default /var/tmp), in B MiB pieces (default 2), then fsync:
//   pwrite       one pwrite per piece and sync_file_range(WRITE) every
//                16 MiB, as image/writer does today;
//   uring        the same pieces as IORING_OP_WRITE, Q in flight (default 8),
//                and the same early writeback (IORING_OP_SYNC_FILE_RANGE);
//   uring-direct O_DIRECT writes, Q in flight (no page cache at all).
// Read (what cr_restart does with a run): the file into a child process's
// memory, warm (in the page cache) and cold (dropped with
// POSIX_FADV_DONTNEED first):
//   mmap         a read-only mapping, MADV_WILLNEED one piece ahead, and
//                process_vm_writev from the mapping, as restore does today;
//   mmap-populate the same with MADV_POPULATE_READ (page tables filled
//                ahead, no fault per 64 KiB);
//   uring        IORING_OP_READ into Q buffers, process_vm_writev from each;
//   uring-direct the same with O_DIRECT.
// Every variant runs once per repetition (default 5) in an order that turns
// each time; prints medians of wall time and of the CPU time of this process
// (io_uring's workers are threads of it, so their time counts).
#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "incompressible.hpp"
#include "mem/madvise.hpp"
#include "util/clock.hpp"

namespace {

struct Config {
  size_t mib = 1024;
  std::string dir = "/var/tmp";
  int reps = 5;
  unsigned qd = 8;
  size_t batch_mib = 2;
};

constexpr size_t kWriteback = 16 << 20;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "bench_uring: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void* map_buffer(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die("mmap");
  std::memset(p, 0, bytes);  // touched once: the runs compare I/O, not first faults
  return p;
}

int open_file(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
  if (fd < 0) die(("open " + path).c_str());
  return fd;
}

// Waits for one completion; dies on an I/O error or a short transfer.
unsigned reap(io_uring& ring) {
  io_uring_cqe* cqe = nullptr;
  int rc = io_uring_wait_cqe(&ring, &cqe);
  if (rc < 0) {
    errno = -rc;
    die("io_uring_wait_cqe");
  }
  if (cqe->res < 0) {
    errno = -cqe->res;
    die("io_uring request");
  }
  unsigned slot = unsigned(io_uring_cqe_get_data64(cqe));
  io_uring_cqe_seen(&ring, cqe);
  return slot;
}

void write_pwrite(const Config& c, const std::string& path, const uint8_t* src, size_t bytes) {
  int fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  const size_t b = c.batch_mib << 20;
  size_t synced = 0;
  for (size_t off = 0; off < bytes; off += b) {
    if (::pwrite(fd, src + off, b, off_t(off)) != ssize_t(b)) die("pwrite");
    if (off + b - synced >= kWriteback) {
      ::sync_file_range(fd, off_t(synced), off_t(off + b - synced), SYNC_FILE_RANGE_WRITE);
      synced = off + b;
    }
  }
  if (::fsync(fd) != 0) die("fsync");
  ::close(fd);
}

void write_uring(const Config& c, const std::string& path, const uint8_t* src, size_t bytes,
                 bool direct) {
  int fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0));
  io_uring ring;
  if (int rc = io_uring_queue_init(c.qd * 2, &ring, 0); rc < 0) {
    errno = -rc;
    die("io_uring_queue_init");
  }
  const size_t b = c.batch_mib << 20;
  size_t next = 0, done = 0, synced = 0;
  unsigned inflight = 0;
  while (done < bytes) {
    while (inflight < c.qd && next < bytes) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      io_uring_prep_write(sqe, fd, src + next, unsigned(b), next);
      io_uring_sqe_set_data64(sqe, 0);
      next += b;
      ++inflight;
      if (!direct && next - synced >= kWriteback) {
        // Written back once the writes before it are in the page cache.
        io_uring_sqe* s = io_uring_get_sqe(&ring);
        io_uring_prep_sync_file_range(s, fd, unsigned(next - synced), synced,
                                      SYNC_FILE_RANGE_WRITE);
        s->flags |= IOSQE_IO_DRAIN;
        io_uring_sqe_set_data64(s, 1);
        synced = next;
        ++inflight;
      }
    }
    io_uring_submit(&ring);
    if (reap(ring) == 0) done += b;
    --inflight;
  }
  while (inflight > 0) {
    reap(ring);
    --inflight;
  }
  io_uring_queue_exit(&ring);
  if (::fsync(fd) != 0) die("fsync");
  ::close(fd);
}

// A child whose memory the reads fill (restore writes into a new process).
struct Child {
  pid_t pid = 0;
  uint8_t* base = nullptr;
  size_t bytes = 0;
  explicit Child(size_t n) : bytes(n) {
    base = static_cast<uint8_t*>(map_buffer(n));
    pid = ::fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      for (;;) ::pause();
    }
  }
  ~Child() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::munmap(base, bytes);
  }
  void put(const uint8_t* from, size_t off, size_t len) {
    iovec l{const_cast<uint8_t*>(from), len}, r{base + off, len};
    if (::process_vm_writev(pid, &l, 1, &r, 1, 0) != ssize_t(len)) die("process_vm_writev");
  }
};

// `advice`: MADV_WILLNEED (read-ahead only, as restore does today) or
// MADV_POPULATE_READ (the page tables filled too: no fault per 64 KiB).
void read_mmap(const Config& c, const std::string& path, size_t bytes, Child& child,
               int advice = MADV_WILLNEED) {
  int fd = open_file(path, O_RDONLY);
  void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) die("mmap of the file");
  auto* p = static_cast<uint8_t*>(m);
  const size_t b = c.batch_mib << 20;
  ::madvise(p, std::min(b, bytes), advice);
  for (size_t off = 0; off < bytes; off += b) {
    if (off + b < bytes) ::madvise(p + off + b, std::min(b, bytes - off - b), advice);
    child.put(p + off, off, b);
  }
  ::munmap(m, bytes);
  ::close(fd);
}

void read_uring(const Config& c, const std::string& path, size_t bytes, Child& child, bool direct) {
  int fd = open_file(path, O_RDONLY | (direct ? O_DIRECT : 0));
  io_uring ring;
  if (int rc = io_uring_queue_init(c.qd, &ring, 0); rc < 0) {
    errno = -rc;
    die("io_uring_queue_init");
  }
  const size_t b = c.batch_mib << 20;
  std::vector<uint8_t*> buf(c.qd);
  std::vector<size_t> at(c.qd);
  for (auto& x : buf) x = static_cast<uint8_t*>(map_buffer(b));
  size_t next = 0, done = 0;
  auto issue = [&](unsigned slot) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_read(sqe, fd, buf[slot], unsigned(b), next);
    io_uring_sqe_set_data64(sqe, slot);
    at[slot] = next;
    next += b;
  };
  for (unsigned s = 0; s < c.qd && next < bytes; ++s) issue(s);
  io_uring_submit(&ring);
  while (done < bytes) {
    unsigned slot = reap(ring);
    child.put(buf[slot], at[slot], b);
    done += b;
    if (next < bytes) {
      issue(slot);
      io_uring_submit(&ring);
    }
  }
  for (auto* x : buf) ::munmap(x, b);
  io_uring_queue_exit(&ring);
  ::close(fd);
}

void drop_cache(const std::string& path) {
  int fd = open_file(path, O_RDONLY);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

struct Variant {
  std::string name;
  std::function<void()> run;
  std::function<void()> before;  // not timed
  std::vector<double> wall, cpu;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void usage(FILE* out) {
  std::fprintf(out,
               "usage: bench_uring [--mib N] [--dir DIR] [--reps R] [--qd Q] [--batch-mib B]\n"
               "io_uring against the page file's current write and read paths; see the\n"
               "comment at the top of bench/bench_uring.cpp and docs/performance.md.\n");
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage(stderr);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--mib") {
      c.mib = std::stoul(value());
    } else if (a == "--dir") {
      c.dir = value();
    } else if (a == "--reps") {
      c.reps = std::stoi(value());
    } else if (a == "--qd") {
      c.qd = unsigned(std::stoul(value()));
    } else if (a == "--batch-mib") {
      c.batch_mib = std::stoul(value());
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (c.mib == 0 || c.batch_mib == 0 || c.mib % c.batch_mib || c.qd == 0 || c.reps < 1) {
    std::fprintf(stderr, "bench_uring: --mib must be a multiple of --batch-mib; all > 0\n");
    return 2;
  }
  const size_t bytes = c.mib << 20;
  const std::string path = c.dir + "/bench-uring.img";
  const auto* src = reinterpret_cast<const uint8_t*>(bench::map_incompressible(bytes));
  if (!src) die("mmap");
  Child child(bytes);

  std::vector<Variant> writes = {
      {"write pwrite", [&] { write_pwrite(c, path, src, bytes); }, {}, {}, {}},
      {"write uring", [&] { write_uring(c, path, src, bytes, false); }, {}, {}, {}},
      {"write uring-direct", [&] { write_uring(c, path, src, bytes, true); }, {}, {}, {}},
  };
  auto warm = [&] { read_mmap(c, path, bytes, child); };  // the file in the page cache
  auto cold = [&] { drop_cache(path); };
  std::vector<Variant> reads = {
      {"read warm mmap", [&] { read_mmap(c, path, bytes, child); }, warm, {}, {}},
      {"read warm mmap-populate",
       [&] { read_mmap(c, path, bytes, child, MADV_POPULATE_READ); },
       warm,
       {},
       {}},
      {"read warm uring", [&] { read_uring(c, path, bytes, child, false); }, warm, {}, {}},
      {"read cold mmap", [&] { read_mmap(c, path, bytes, child); }, cold, {}, {}},
      {"read cold mmap-populate",
       [&] { read_mmap(c, path, bytes, child, MADV_POPULATE_READ); },
       cold,
       {},
       {}},
      {"read cold uring", [&] { read_uring(c, path, bytes, child, false); }, cold, {}, {}},
      {"read cold uring-direct", [&] { read_uring(c, path, bytes, child, true); }, cold, {}, {}},
  };
  auto measure = [&](std::vector<Variant>& vs, int rep) {
    for (size_t k = 0; k < vs.size(); ++k) {
      Variant& v = vs[(k + size_t(rep)) % vs.size()];
      if (v.before) v.before();
      const double c0 = cpu_seconds(), t0 = ckpt::now_seconds();
      v.run();
      v.wall.push_back(ckpt::now_seconds() - t0);
      v.cpu.push_back(cpu_seconds() - c0);
    }
  };
  for (int rep = 0; rep < c.reps; ++rep) {
    measure(writes, rep);
    measure(reads, rep);
  }
  ::unlink(path.c_str());
  std::printf("%zu MiB in %zu MiB pieces, %u in flight, %s, medians of %d\n", c.mib, c.batch_mib,
              c.qd, c.dir.c_str(), c.reps);
  std::printf("%-24s %9s %9s %9s\n", "variant", "wall s", "CPU s", "GB/s");
  for (auto* vs : {&writes, &reads})
    for (const Variant& v : *vs)
      std::printf("%-24s %9.3f %9.3f %9.2f\n", v.name.c_str(), median(v.wall), median(v.cpu),
                  double(bytes) / median(v.wall) / 1e9);
  return 0;
}
