// The pagemap-scan tracker against a real target: a forked child that maps
// memory and then executes commands sent over a pipe (writes, layout
// changes, blocking system calls). Every round checks the contract: no false
// negatives, and for plain writes exactly the written pages.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dirty/ledger.hpp"
#include "dirty/pagemap_scan.hpp"
#include "mem/reader.hpp"
#include "proc/freeze.hpp"
#include "proc/maps.hpp"
#include "util/fd.hpp"
#include "util/hash.hpp"

namespace ckpt::dirty {
namespace {

using image::VmaRecord;
using mem::Range;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kRegionPages = 2048;  // 8 MiB of anonymous memory, all populated
constexpr uint64_t kFilePages = 64;      // a private file mapping

// ---------------------------------------------------------------- the target

enum Op : uint32_t {
  kWrite,         // n addresses follow: increment one byte at each
  kMremap,        // move [a, a+b) to a new address, returned
  kFixedReplace,  // mmap MAP_FIXED anonymous over [a, a+b)
  kUnmapMap,      // munmap [a, a+b), then mmap the same range again
  kDontneed,      // madvise(MADV_DONTNEED) [a, a+b)
  kBrk,           // grow the heap by a bytes; returns the old break
  kReadInto,      // read() b bytes from the data pipe to address a
  kClose,         // close(a)
  kDupNull,       // open /dev/null at fd a
  kSleep,         // nanosleep a ms; returns (result, elapsed ms)
  kHuge,          // MADV_HUGEPAGE + MADV_COLLAPSE on [a, a+b)
  kSplit,         // MADV_NOHUGEPAGE on [a, a+b), then split it (mprotect one page and back)
  kRewrite,       // write each page of [a, a+b) with the byte it holds (content unchanged)
  kFork,          // fork a grandchild that serves the second command pipe
  kExit,
};

struct Cmd {
  uint32_t op = 0, n = 0;
  uint64_t a = 0, b = 0;
};
struct Ack {
  int64_t result = 0;
  uint64_t a = 0, b = 0;
};

struct Pipes {
  int cmd[2], ack[2], data[2];
  void open() {
    ASSERT_EQ(::pipe(cmd), 0);
    ASSERT_EQ(::pipe(ack), 0);
    ASSERT_EQ(::pipe(data), 0);
  }
  void close_all() {
    for (int* p : {cmd, ack, data}) ::close(p[0]), ::close(p[1]);
  }
};

bool read_full(int fd, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
  }
  return true;
}

bool write_full(int fd, const void* buf, size_t len) {
  auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= size_t(n);
  }
  return true;
}

int64_t now_ms() {
  timespec t;
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

// The target's main loop (runs in the child; never returns).
[[noreturn]] void serve(const Pipes& p, const Pipes* grandchild) {
  std::vector<uint64_t> addrs;
  for (;;) {
    Cmd c;
    if (!read_full(p.cmd[0], &c, sizeof c)) ::_exit(0);
    Ack ack;
    switch (c.op) {
      case kWrite:
        addrs.resize(c.n);
        if (!read_full(p.cmd[0], addrs.data(), c.n * 8)) ::_exit(2);
        for (uint64_t a : addrs) {
          volatile char* c = reinterpret_cast<volatile char*>(a);
          *c = char(*c + 1);
        }
        break;
      case kMremap: {
        // Moved for certain: onto a reserved range elsewhere.
        void* dst = ::mmap(nullptr, c.b, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        void* to =
            ::mremap(reinterpret_cast<void*>(c.a), c.b, c.b, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
        ack.result = to == MAP_FAILED ? -errno : 0;
        ack.a = reinterpret_cast<uint64_t>(to);
        break;
      }
      case kFixedReplace:
        ack.result = ::mmap(reinterpret_cast<void*>(c.a), c.b, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED
                         ? -errno
                         : 0;
        break;
      case kUnmapMap:
        ::munmap(reinterpret_cast<void*>(c.a), c.b);
        ack.result = ::mmap(reinterpret_cast<void*>(c.a), c.b, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
                            0) == reinterpret_cast<void*>(c.a)
                         ? 0
                         : -1;
        break;
      case kDontneed:
        ack.result = ::madvise(reinterpret_cast<void*>(c.a), c.b, MADV_DONTNEED);
        break;
      case kBrk:
        ack.a = reinterpret_cast<uint64_t>(::sbrk(intptr_t(c.a)));
        break;
      case kReadInto:
        ack.result = read_full(p.data[0], reinterpret_cast<void*>(c.a), c.b) ? 0 : -1;
        break;
      case kClose:
        ack.result = ::close(int(c.a));
        break;
      case kDupNull: {
        int fd = ::open("/dev/null", O_RDONLY);
        ack.result = ::dup2(fd, int(c.a));
        ::close(fd);
        break;
      }
      case kSleep: {
        int64_t t0 = now_ms();
        timespec ts{time_t(c.a / 1000), long(c.a % 1000) * 1000000};
        ack.result = ::nanosleep(&ts, nullptr) == 0 ? 0 : -errno;
        ack.a = uint64_t(now_ms() - t0);
        break;
      }
      case kHuge:
        ::madvise(reinterpret_cast<void*>(c.a), c.b, MADV_HUGEPAGE);
        ack.result = ::madvise(reinterpret_cast<void*>(c.a), c.b, 25 /* MADV_COLLAPSE */);
        break;
      case kSplit: {
        char* at = reinterpret_cast<char*>(c.a);
        ::madvise(at, c.b, MADV_NOHUGEPAGE);
        ack.result = ::mprotect(at, kPage, PROT_READ) == 0 &&
                             ::mprotect(at, kPage, PROT_READ | PROT_WRITE) == 0
                         ? 0
                         : -errno;
        break;
      }
      case kRewrite:
        for (uint64_t a = c.a; a < c.a + c.b; a += kPage) {
          volatile char* v = reinterpret_cast<volatile char*>(a);
          *v = *v;
        }
        break;
      case kFork: {
        pid_t g = ::fork();
        if (g == 0) serve(*grandchild, nullptr);
        ack.a = uint64_t(g);
        break;
      }
      case kExit:
        ::_exit(0);
    }
    if (!write_full(p.ack[1], &ack, sizeof ack)) ::_exit(3);
  }
}

class Target {
 public:
  // Forks the target: kRegionPages of populated anonymous memory, and a
  // private mapping of `file` (half its pages read, none written).
  explicit Target(const std::string& file) {
    pipes_.open();
    grand_.open();
    UniqueFd f(::open(file.c_str(), O_RDONLY)), f_rw(::open(file.c_str(), O_RDWR));
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      auto* region =
          static_cast<char*>(::mmap(nullptr, kRegionPages * kPage, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      std::memset(region, 1, kRegionPages * kPage);
      auto* map = static_cast<char*>(
          ::mmap(nullptr, kFilePages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE, f.get(), 0));
      for (uint64_t i = 0; i < kFilePages / 2; ++i) (void)*(volatile char*)(map + i * kPage);
      auto* shared_anon = static_cast<char*>(
          ::mmap(nullptr, 16 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
      auto* shared_file = static_cast<char*>(
          ::mmap(nullptr, 16 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, f_rw.get(), 0));
      shared_anon[0] = shared_file[0] = 1;
      Ack hello[2] = {
          {0, reinterpret_cast<uint64_t>(region), reinterpret_cast<uint64_t>(map)},
          {0, reinterpret_cast<uint64_t>(shared_anon), reinterpret_cast<uint64_t>(shared_file)}};
      write_full(pipes_.ack[1], hello, sizeof hello);
      serve(pipes_, &grand_);
    }
    Ack hello[2];
    read_full(pipes_.ack[0], hello, sizeof hello);
    region_ = hello[0].a;
    file_map_ = hello[0].b;
    shared_anon_ = hello[1].a;
    shared_file_ = hello[1].b;
  }

  ~Target() {
    for (pid_t g : grandchildren_) ::kill(g, SIGKILL);
    ::kill(pid_, SIGKILL);
    int st;
    ::waitpid(pid_, &st, 0);
    pipes_.close_all();
    grand_.close_all();
  }

  pid_t pid() const { return pid_; }
  uint64_t region() const { return region_; }
  uint64_t page(uint64_t i) const { return region_ + i * kPage; }
  uint64_t file_map() const { return file_map_; }
  uint64_t shared_anon() const { return shared_anon_; }  // 16 pages
  uint64_t shared_file() const { return shared_file_; }  // 16 pages

  void send(Cmd c, const std::vector<uint64_t>& addrs = {}, bool grandchild = false) {
    const Pipes& p = grandchild ? grand_ : pipes_;
    c.n = uint32_t(addrs.size());
    ASSERT_TRUE(write_full(p.cmd[1], &c, sizeof c));
    ASSERT_TRUE(write_full(p.cmd[1], addrs.data(), addrs.size() * 8));
  }
  Ack ack(bool grandchild = false) {
    Ack a;
    EXPECT_TRUE(read_full((grandchild ? grand_ : pipes_).ack[0], &a, sizeof a));
    return a;
  }
  Ack run(Cmd c, const std::vector<uint64_t>& addrs = {}, bool grandchild = false) {
    send(c, addrs, grandchild);
    return ack(grandchild);
  }
  void feed(const std::string& bytes) {
    ASSERT_TRUE(write_full(pipes_.data[1], bytes.data(), bytes.size()));
  }
  pid_t fork_grandchild() {
    pid_t g = pid_t(run(Cmd{kFork}).a);
    grandchildren_.push_back(g);
    return g;
  }
  void stop_grandchild(pid_t g) {
    ::kill(g, SIGKILL);
    grandchildren_.erase(std::find(grandchildren_.begin(), grandchildren_.end(), g));
  }

 private:
  pid_t pid_ = -1;
  Pipes pipes_{}, grand_{};
  uint64_t region_ = 0, file_map_ = 0, shared_anon_ = 0, shared_file_ = 0;
  std::vector<pid_t> grandchildren_;
};

// ------------------------------------------------------ layout and checking

// The layout as the checkpoint records it (dump::collect_vmas, simplified).
std::vector<VmaRecord> layout(pid_t pid) {
  std::vector<VmaRecord> out;
  auto maps = proc::read_maps(pid);
  EXPECT_TRUE(maps.ok());
  if (!maps.ok()) return out;
  for (const proc::MapEntry& m : *maps) {
    if (m.path == "[vsyscall]") continue;
    VmaRecord v;
    v.start = m.start;
    v.end = m.end;
    v.prot = (m.r ? PROT_READ : 0) | (m.w ? PROT_WRITE : 0) | (m.x ? PROT_EXEC : 0);
    v.flags = m.shared ? uint32_t(image::kVmaShared) : 0u;
    v.name = m.path;
    if (m.path == "[vvar]" || m.path == "[vvar_vclock]") {
      v.flags |= image::kVmaVvar;
    } else if (m.path == "[vdso]") {
      v.flags |= image::kVmaVdso;
    } else if (m.path == "[heap]") {
      v.flags |= image::kVmaHeap;
    } else if (m.path == "[stack]") {
      v.flags |= image::kVmaGrowsDown;
    } else if (m.inode != 0 && m.path.rfind("/dev/zero", 0) != 0) {
      struct stat st {};
      ::stat(m.path.c_str(), &st);
      v.flags |= image::kVmaFile;
      v.pgoff = m.offset;
      v.dev = st.st_dev;
      v.ino = st.st_ino;
      v.file_size = uint64_t(st.st_size);
      v.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    }
    out.push_back(v);
  }
  return out;
}

// Pages of `rs` inside `area`.
std::set<uint64_t> pages_in(const std::vector<Range>& rs, Range area) {
  std::set<uint64_t> out;
  for (const Range& r : rs)
    for (uint64_t a = std::max(r.addr, area.addr); a < std::min(r.end(), area.end()); a += kPage)
      out.insert(a);
  return out;
}

std::set<uint64_t> pages_in(const std::vector<Range>& rs, const std::vector<Range>& areas) {
  std::set<uint64_t> out;
  for (const Range& a : areas) out.merge(pages_in(rs, a));
  return out;
}

std::set<uint64_t> span(uint64_t addr, uint64_t len) {
  std::set<uint64_t> out;
  for (uint64_t a = addr; a < addr + len; a += kPage) out.insert(a);
  return out;
}

// Sorted, merged, page-aligned, and `written` and `unknown` disjoint.
void expect_well_formed(const DirtySet& d) {
  for (const auto* rs : {&d.written, &d.unknown})
    for (size_t i = 0; i < rs->size(); ++i) {
      const Range& r = (*rs)[i];
      EXPECT_EQ(r.addr % kPage, 0u);
      EXPECT_EQ(r.len % kPage, 0u);
      EXPECT_GT(r.len, 0u);
      if (i > 0) {
        EXPECT_LT((*rs)[i - 1].end(), r.addr) << "not sorted and merged";
      }
    }
  for (const Range& w : d.written)
    for (const Range& u : d.unknown)
      EXPECT_FALSE(w.addr < u.end() && u.addr < w.end()) << "written and unknown overlap";
}

std::string show(const std::set<uint64_t>& pages, uint64_t base) {
  std::string s;
  int n = 0;
  for (uint64_t p : pages) {
    if (n++ == 12) return s + " ...";
    s += " " + std::to_string((int64_t(p) - int64_t(base)) / int64_t(kPage));
  }
  return s;
}

// The page-hash table a full checkpoint records for the target's region.
std::vector<image::PageHash> hash_pages(pid_t pid, Range area) {
  std::vector<uint8_t> buf(area.len);
  mem::RemoteReader reader(pid);
  EXPECT_TRUE(reader.read(&area, 1, buf.data()).ok());
  std::vector<image::PageHash> out;
  for (uint64_t off = 0; off < area.len; off += kPage)
    out.push_back({area.addr + off, xxh3(buf.data() + off, kPage)});
  return out;
}

// ------------------------------------------------------------- the fixture

// A tracker without adaptive blocks: every written page protected again,
// so what a collect reports is exact.
PagemapScanTracker::Options plain() {
  PagemapScanTracker::Options o;
  o.adaptive.enabled = false;
  return o;
}

class PagemapScan : public ::testing::Test {
 protected:
  void SetUp() override {
    // These tests check plain tracking, which is exact. Adaptive tracking
    // may report more (whole hot blocks), never less: it has its own tests
    // (AdaptiveHotAndColdNeverMissAWrite below, adaptive_tracking_test.cpp,
    // e2e.incremental_adaptive) and enables itself there explicitly: the
    // trackers here are made with plain().
    FeatureCheck c = PagemapScanTracker::probe();
    if (!c.ok) {
      GTEST_SKIP() << c.detail;
    }
    char name[] = "/tmp/pagemap_scan_test.XXXXXX";
    int fd = ::mkstemp(name);
    ASSERT_GE(fd, 0);
    file_ = name;
    std::string content(kFilePages * kPage, 'f');
    ASSERT_TRUE(write_full(fd, content.data(), content.size()));
    ::close(fd);
    target_ = std::make_unique<Target>(file_);
  }
  void TearDown() override {
    target_.reset();
    if (!file_.empty()) ::unlink(file_.c_str());
  }

  // Freezes `pid`, arms, lets it go.
  void arm(pid_t pid, PagemapScanTracker& t) {
    auto fp = proc::FrozenProcess::freeze(pid);
    ASSERT_TRUE(fp.ok()) << fp.error().message;
    prev_ = layout(pid);
    Status st = t.arm(pid, prev_, &state_);
    ASSERT_TRUE(st.ok()) << st.error().message;
    ASSERT_TRUE((*fp)->release().ok());
  }

  // A full that records its pages' hashes (returned) arms through `t`
  // (dirty/adaptive.hpp: fresh blocks, armed on their sample).
  std::vector<image::PageHash> arm_sampled(PagemapScanTracker& t) {
    std::vector<image::PageHash> hashes = hash_pages(target_->pid(), region());
    state_.full_hashes = true;
    state_.generation = 1;
    arm(target_->pid(), t);
    return hashes;
  }

  // Another chain of the same process arms it (a cr_full elsewhere, chain
  // id `id`); state_ stays this chain's.
  void arm_as_another_chain(uint8_t id) {
    TrackerState mine = state_;
    state_.chain_id[0] = id;
    state_.generation = 1;
    state_.prev_generation = 0;
    PagemapScanTracker other{plain()};
    arm(target_->pid(), other);
    state_ = mine;
  }

  // Freezes `pid`, collects, lets it go.
  DirtySet collect(pid_t pid, PagemapScanTracker& t) {
    auto fp = proc::FrozenProcess::freeze(pid);
    EXPECT_TRUE(fp.ok()) << fp.error().message;
    if (!fp.ok()) return {};
    std::vector<VmaRecord> now = layout(pid);
    auto d = t.collect(pid, now, prev_, &state_);
    EXPECT_TRUE(d.ok()) << d.error().message;
    prev_ = now;
    EXPECT_TRUE((*fp)->release().ok());
    if (!d.ok()) return {};
    expect_well_formed(*d);
    return *d;
  }

  // Writes `pages` of the region in the target.
  void write_pages(const std::set<uint64_t>& addrs, bool grandchild = false) {
    target_->run(Cmd{kWrite}, std::vector<uint64_t>(addrs.begin(), addrs.end()), grandchild);
  }

  std::set<uint64_t> random_pages(std::mt19937& rng, size_t n, uint64_t first = 0,
                                  uint64_t count = kRegionPages) {
    std::set<uint64_t> out;
    while (out.size() < n) out.insert(target_->page(first + rng() % count));
    return out;
  }

  // Plain writes: exactly the written pages within `areas`, nothing unknown.
  void expect_exact(const DirtySet& d, const std::set<uint64_t>& truth,
                    const std::vector<Range>& areas) {
    EXPECT_FALSE(d.everything) << d.reason;
    std::set<uint64_t> got = pages_in(d.written, areas);
    std::set<uint64_t> missing, extra;
    std::set_difference(truth.begin(), truth.end(), got.begin(), got.end(),
                        std::inserter(missing, missing.end()));
    std::set_difference(got.begin(), got.end(), truth.begin(), truth.end(),
                        std::inserter(extra, extra.end()));
    EXPECT_TRUE(missing.empty()) << missing.size() << " written pages not reported:"
                                 << show(missing, target_->region());
    EXPECT_TRUE(extra.empty()) << extra.size() << " pages reported but not written:"
                               << show(extra, target_->region());
    EXPECT_TRUE(pages_in(d.unknown, areas).empty());
  }

  // No false negatives: every page in `truth` is written or unknown.
  void expect_covers(const DirtySet& d, const std::set<uint64_t>& truth) {
    if (d.everything) return;
    std::set<uint64_t> missing;
    for (uint64_t p : truth) {
      auto in = [&](const std::vector<Range>& rs) {
        return std::any_of(rs.begin(), rs.end(),
                           [&](const Range& r) { return r.addr <= p && p < r.end(); });
      };
      if (!in(d.written) && !in(d.unknown)) missing.insert(p);
    }
    EXPECT_TRUE(missing.empty()) << missing.size() << " changed pages not reported:"
                                 << show(missing, target_->region());
  }

  Range region() const { return Range{target_->region(), kRegionPages * kPage}; }
  // HugePagesStayHugeAndNeverMissAWrite*, with adaptive tracking or without.
  void flip_huge_blocks(bool adaptive);

  std::string file_;
  std::unique_ptr<Target> target_;
  TrackerState state_;
  std::vector<VmaRecord> prev_;
};

// --------------------------------------------------------------- the tests

TEST_F(PagemapScan, ExactAcrossRoundsAndToolRuns) {
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  EXPECT_EQ(state_.target_fd, kTrackerFd);
  std::mt19937 rng(1);
  for (size_t n : {0, 1, 37, 300, 5, 1000}) {
    SCOPED_TRACE("round writing " + std::to_string(n) + " pages");
    auto truth = random_pages(rng, n);
    write_pages(truth);
    // A new tracker object each round: what a new tool run starts from.
    PagemapScanTracker fresh{plain()};
    DirtySet d = collect(target_->pid(), fresh);
    expect_exact(d, truth, {region()});
    // Shared anonymous memory: never vouched for. Shared file mappings: the
    // file holds their content, nothing to report.
    Range shared_anon{target_->shared_anon(), 16 * kPage};
    Range shared_file{target_->shared_file(), 16 * kPage};
    EXPECT_EQ(pages_in(d.unknown, shared_anon), span(shared_anon.addr, shared_anon.len));
    EXPECT_TRUE(pages_in(d.written, shared_file).empty());
    EXPECT_TRUE(pages_in(d.unknown, shared_file).empty());
  }
}

// The estimate a capture prefaults its buffers by: what reads as written
// now, counted while the process runs, and nothing protected by counting.
TEST_F(PagemapScan, WrittenEstimateCountsAndChangesNothing) {
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  collect(target_->pid(), t);  // whatever the target wrote since the arm
  std::mt19937 rng(5);
  auto truth = random_pages(rng, 300);
  write_pages(truth);
  const uint64_t est = t.written_estimate(target_->pid(), state_);
  // The region's 300 pages, and a few the target wrote serving the command.
  EXPECT_GE(est, 300 * kPage);
  EXPECT_LE(est, (300 + 64) * kPage);
  PagemapScanTracker fresh{plain()};
  expect_exact(collect(target_->pid(), fresh), truth, {region()});
}

TEST_F(PagemapScan, TrackerFdIsCloseOnExecAndAvoidsTakenNumbers) {
  target_->run(Cmd{kDupNull, 0, uint64_t(kTrackerFd)});
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  EXPECT_EQ(state_.target_fd, kTrackerFd + 1);
  std::string base = "/proc/" + std::to_string(target_->pid());
  char link[64] = {};
  ASSERT_GT(::readlink((base + "/fd/" + std::to_string(kTrackerFd)).c_str(), link, 63), 0);
  EXPECT_STREQ(link, "/dev/null");
  std::memset(link, 0, sizeof link);
  ASSERT_GT(::readlink((base + "/fd/" + std::to_string(state_.target_fd)).c_str(), link, 63), 0);
  EXPECT_STREQ(link, "anon_inode:[userfaultfd]");
  auto info = read_file(base + "/fdinfo/" + std::to_string(state_.target_fd));
  ASSERT_TRUE(info.ok());
  unsigned flags = 0;
  ASSERT_EQ(std::sscanf(info->c_str() + info->find("flags:"), "flags: %o", &flags), 1);
  EXPECT_TRUE(flags & O_CLOEXEC);
}

TEST_F(PagemapScan, ArmingAgainKeepsTheUserfaultfd) {
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  int fd = state_.target_fd;
  write_pages({target_->page(3)});
  arm(target_->pid(), t);  // a new full checkpoint: UFFDIO_API must not run twice
  EXPECT_EQ(state_.target_fd, fd);
  std::set<uint64_t> truth{target_->page(7), target_->page(8)};
  write_pages(truth);
  expect_exact(collect(target_->pid(), t), truth, {region()});
}

// A live full's first round: install() takes the stop, arm() runs while the
// process runs (dump/precopy). Writes after arm() returns are all reported,
// whatever happened between the two: pages written, a range replaced under
// the layout install() saw, a range unmapped and mapped again.
TEST_F(PagemapScan, ArmWhileRunningAfterInstall) {
  PagemapScanTracker t{plain()};
  {
    auto fp = proc::FrozenProcess::freeze(target_->pid());
    ASSERT_TRUE(fp.ok()) << fp.error().message;
    prev_ = layout(target_->pid());
    auto installed = t.install(target_->pid(), &state_);
    ASSERT_TRUE(installed.ok()) << installed.error().message;
    EXPECT_TRUE(*installed);
    EXPECT_EQ(state_.target_fd, kTrackerFd);
    ASSERT_TRUE((*fp)->release().ok());
  }
  const uint64_t p = kPage;
  write_pages({target_->page(1), target_->page(2)});
  EXPECT_EQ(target_->run(Cmd{kFixedReplace, 0, target_->page(300), 32 * p}).result, 0);
  EXPECT_EQ(target_->run(Cmd{kUnmapMap, 0, target_->page(400), 32 * p}).result, 0);
  // Not frozen: the target waits for its next command, as a running
  // program between two writes.
  Status armed = t.arm(target_->pid(), prev_, &state_);
  ASSERT_TRUE(armed.ok()) << armed.error().message;
  std::set<uint64_t> after{target_->page(2), target_->page(9), target_->page(310),
                           target_->page(420), target_->page(2000)};
  write_pages(after);
  DirtySet d = collect(target_->pid(), t);
  EXPECT_FALSE(d.everything) << d.reason;
  expect_covers(d, after);
  // Away from the replaced ranges, exactly what was written after the arm.
  expect_exact(d, {target_->page(2), target_->page(9), target_->page(2000)},
               {{target_->page(0), 300 * p}, {target_->page(432), (kRegionPages - 432) * p}});
  // The next interval is exact everywhere.
  std::set<uint64_t> next{target_->page(3), target_->page(305), target_->page(425)};
  write_pages(next);
  expect_exact(collect(target_->pid(), t), next, {region()});

  // A tracked process keeps its userfaultfd: arm() checks it frozen.
  PagemapScanTracker again{plain()};
  auto fp = proc::FrozenProcess::freeze(target_->pid());
  ASSERT_TRUE(fp.ok()) << fp.error().message;
  auto reinstalled = again.install(target_->pid(), &state_);
  ASSERT_TRUE(reinstalled.ok()) << reinstalled.error().message;
  EXPECT_FALSE(*reinstalled);
  ASSERT_TRUE((*fp)->release().ok());
}

// More regions than the kernel's 512-entry bounce buffer, and scans that
// fill the caller's buffer and must resume (the walk_end quirk).
TEST_F(PagemapScan, ManyScatteredRegions) {
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  for (size_t slots : {16384, 64, 511, 512, 513}) {
    SCOPED_TRACE("buffer of " + std::to_string(slots) + " regions");
    std::set<uint64_t> truth;
    for (uint64_t i = slots % 2; i < kRegionPages; i += 2) truth.insert(target_->page(i));
    write_pages(truth);
    PagemapScanTracker::Options o = plain();
    o.scan_regions = slots;
    PagemapScanTracker small(o);
    DirtySet d = collect(target_->pid(), small);
    EXPECT_GE(d.written.size(), 1000u);
    expect_exact(d, truth, {region()});
  }
}

TEST_F(PagemapScan, LayoutChangesAreReported) {
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  const uint64_t p = kPage;
  // Everything at once, between two checkpoints.
  uint64_t moved = target_->run(Cmd{kMremap, 0, target_->page(100), 64 * p}).a;
  ASSERT_NE(moved, uint64_t(-1));
  EXPECT_EQ(target_->run(Cmd{kFixedReplace, 0, target_->page(300), 32 * p}).result, 0);
  EXPECT_EQ(target_->run(Cmd{kUnmapMap, 0, target_->page(400), 32 * p}).result, 0);
  EXPECT_EQ(target_->run(Cmd{kDontneed, 0, target_->page(600), 40 * p}).result, 0);
  EXPECT_EQ(target_->run(Cmd{kDontneed, 0, target_->page(1024), 512 * p}).result, 0);
  target_->feed(std::string(2 * p, 'r'));
  EXPECT_EQ(target_->run(Cmd{kReadInto, 0, target_->page(700) + 100, 2 * p}).result, 0);
  uint64_t brk0 = target_->run(Cmd{kBrk, 0, 16 * p}).a;
  std::set<uint64_t> heap_writes{(brk0 + 5 * p) & ~(p - 1), (brk0 + 12 * p) & ~(p - 1)};
  write_pages(heap_writes);
  std::set<uint64_t> plain{target_->page(10), target_->page(2000)};
  write_pages(plain);

  DirtySet d = collect(target_->pid(), t);
  EXPECT_FALSE(d.everything) << d.reason;
  expect_covers(d, span(moved, 64 * p));
  expect_covers(d, span(target_->page(300), 32 * p));
  expect_covers(d, span(target_->page(400), 32 * p));
  expect_covers(d, heap_writes);
  // Zapped pages and kernel-side writes are reported written by the kernel.
  std::set<uint64_t> zapped = span(target_->page(600), 40 * p);
  zapped.merge(span(target_->page(1024), 512 * p));
  std::set<uint64_t> read_into = span(target_->page(700), 3 * p);
  std::set<uint64_t> truth = plain;
  truth.insert(zapped.begin(), zapped.end());
  truth.insert(read_into.begin(), read_into.end());
  // The region's surviving parts: exact (the hole left by mremap is gone).
  std::vector<Range> surviving{{target_->page(0), 100 * p},
                               {target_->page(164), 136 * p},
                               {target_->page(332), 68 * p},
                               {target_->page(432), (kRegionPages - 432) * p}};
  expect_exact(d, truth, surviving);

  // Tracking goes on, new and moved mappings included: exact again.
  std::set<uint64_t> next{target_->page(5), target_->page(310), target_->page(420),
                          target_->page(620), moved + 3 * p};
  write_pages(next);
  std::vector<Range> all = surviving;
  all.push_back({target_->page(300), 32 * p});
  all.push_back({target_->page(400), 32 * p});
  all.push_back({moved, 64 * p});
  expect_exact(collect(target_->pid(), t), next, all);
}

// Transparent huge pages protected per PMD (as quiet huge blocks are, and
// every one with TrackingOptions::keep_huge_pages = false): writes and a whole-PMD
// MADV_DONTNEED (which leaves no page table behind) stay exact.
TEST_F(PagemapScan, HugePages) {
  const uint64_t huge = 2 << 20;
  uint64_t aligned = (target_->region() + huge - 1) & ~(huge - 1);
  bool collapsed = target_->run(Cmd{kHuge, 0, aligned, 2 * huge}).result == 0;
  auto rollup = read_file("/proc/" + std::to_string(target_->pid()) + "/smaps_rollup");
  ASSERT_TRUE(rollup.ok());
  size_t at = rollup->find("AnonHugePages:");
  long thp_kb = at == std::string::npos ? 0 : std::strtol(rollup->c_str() + at + 14, nullptr, 10);
  if (collapsed) {
    EXPECT_GE(thp_kb, 4096) << "MADV_COLLAPSE succeeded but no THP mapped";
  }
  RecordProperty("thp_kb", std::to_string(thp_kb));

  PagemapScanTracker::Options o = plain();
  o.huge.keep_huge = false;
  PagemapScanTracker t(o);
  arm(target_->pid(), t);
  std::set<uint64_t> truth{aligned + 7 * kPage, aligned + 300 * kPage, aligned + huge + 5 * kPage,
                           target_->page(1)};
  write_pages(truth);
  expect_exact(collect(target_->pid(), t), truth, {region()});

  EXPECT_EQ(target_->run(Cmd{kDontneed, 0, aligned + huge, huge}).result, 0);
  truth = span(aligned + huge, huge);
  truth.insert(aligned + 9 * kPage);
  write_pages({aligned + 9 * kPage});
  expect_exact(collect(target_->pid(), t), truth, {region()});

  truth = {aligned + 10 * kPage, aligned + huge + 10 * kPage};
  write_pages(truth);
  expect_exact(collect(target_->pid(), t), truth, {region()});
}

TEST_F(PagemapScan, PrivateFileCopies) {
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  uint64_t f = target_->file_map();
  Range file{f, kFilePages * kPage};
  write_pages({f + 2 * kPage, f + 5 * kPage, f + 40 * kPage});
  DirtySet d = collect(target_->pid(), t);
  expect_covers(d, {f + 2 * kPage, f + 5 * kPage, f + 40 * kPage});
  // A private copy dropped by MADV_DONTNEED reverts to the file's content:
  // reported, like the copies themselves. Reading file pages is not a write.
  EXPECT_EQ(target_->run(Cmd{kDontneed, 0, f + 2 * kPage, kPage}).result, 0);
  write_pages({f + 50 * kPage});
  d = collect(target_->pid(), t);
  expect_covers(d, {f + 2 * kPage, f + 50 * kPage});
  std::set<uint64_t> got = pages_in(d.written, file);
  got.merge(pages_in(d.unknown, file));
  EXPECT_EQ(got,
            (std::set<uint64_t>{f + 2 * kPage, f + 5 * kPage, f + 40 * kPage, f + 50 * kPage}));
  // Dropped again after being reported: still reported.
  EXPECT_EQ(target_->run(Cmd{kDontneed, 0, f + 5 * kPage, kPage}).result, 0);
  expect_covers(collect(target_->pid(), t), {f + 5 * kPage});
}

// Waits until `pid` sleeps in one of the system calls `nrs` (/proc/PID/syscall).
bool blocked_in(pid_t pid, std::initializer_list<long> nrs) {
  for (int i = 0; i < 400; ++i) {
    auto s = read_file("/proc/" + std::to_string(pid) + "/syscall");
    if (s.ok() && !s->empty() && std::isdigit((unsigned char)(*s)[0])) {
      long nr = std::strtol(s->c_str(), nullptr, 10);
      if (std::find(nrs.begin(), nrs.end(), nr) != nrs.end()) return true;
    }
    ::usleep(5000);
  }
  return false;
}

// The target is stopped inside a blocking system call while we inject ours;
// it must finish that call as if nothing happened.
TEST_F(PagemapScan, BlockedSystemCallsFinish) {
  PagemapScanTracker t{plain()};
  target_->send(Cmd{kSleep, 0, 400});
  ASSERT_TRUE(blocked_in(target_->pid(), {SYS_nanosleep, SYS_clock_nanosleep}));
  arm(target_->pid(), t);  // injects userfaultfd/dup3/close during nanosleep
  Ack a = target_->ack();
  EXPECT_EQ(a.result, 0);
  EXPECT_GE(a.a, 400u);
  EXPECT_LT(a.a, 2000u);

  target_->send(Cmd{kReadInto, 0, target_->page(9), 5});
  ASSERT_TRUE(blocked_in(target_->pid(), {SYS_read}));
  collect(target_->pid(), t);  // blocked in read() on an empty pipe
  target_->feed("hello");
  EXPECT_EQ(target_->ack().result, 0);
  std::set<uint64_t> truth{target_->page(9)};
  expect_exact(collect(target_->pid(), t), truth, {region()});

  // Collect that has to re-arm (injects again) while the target sleeps.
  target_->run(Cmd{kClose, 0, uint64_t(state_.target_fd)});
  target_->send(Cmd{kSleep, 0, 300});
  ASSERT_TRUE(blocked_in(target_->pid(), {SYS_nanosleep, SYS_clock_nanosleep}));
  EXPECT_TRUE(collect(target_->pid(), t).everything);
  a = target_->ack();
  EXPECT_EQ(a.result, 0);
  EXPECT_GE(a.a, 300u);
}

TEST_F(PagemapScan, ClosedUserfaultfdMeansEverything) {
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  int fd = state_.target_fd;
  write_pages({target_->page(1)});
  EXPECT_EQ(target_->run(Cmd{kClose, 0, uint64_t(fd)}).result, 0);
  DirtySet d = collect(target_->pid(), t);
  EXPECT_TRUE(d.everything);
  EXPECT_NE(d.reason.find("gone"), std::string::npos) << d.reason;
  EXPECT_EQ(state_.target_fd, fd);  // armed afresh at the same (free again) number
  std::set<uint64_t> truth{target_->page(2), target_->page(3)};
  write_pages(truth);
  expect_exact(collect(target_->pid(), t), truth, {region()});

  // Not armed at all: everything, and armed from then on.
  state_ = TrackerState{};
  EXPECT_TRUE(collect(target_->pid(), t).everything);
}

// A child inherits the tracker's fd across fork, but not the registration:
// collect on it must not trust that fd (it acts on the parent's memory).
TEST_F(PagemapScan, InheritedUserfaultfdIsNotTrusted) {
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  TrackerState parent = state_;
  std::vector<VmaRecord> parent_prev = prev_;
  pid_t g = target_->fork_grandchild();
  prev_ = layout(g);
  // A new process has no ledger entry, which alone makes the collect save
  // everything. Give it the parent's, to reach the check of the fd itself.
  auto entry = read_ledger(target_->pid());
  ASSERT_TRUE(entry.has_value());
  ASSERT_TRUE(write_ledger(g, *entry).ok());
  DirtySet d = collect(g, t);
  EXPECT_TRUE(d.everything);
  EXPECT_NE(d.reason.find("does not track"), std::string::npos) << d.reason;
  EXPECT_EQ(state_.target_fd, parent.target_fd);  // its stale copy replaced in place
  std::set<uint64_t> truth{target_->page(11)};
  write_pages(truth, /*grandchild=*/true);
  expect_exact(collect(g, t), truth, {region()});
  target_->stop_grandchild(g);

  // The parent's tracking is untouched by all this.
  state_ = parent;
  prev_ = parent_prev;
  truth = {target_->page(12), target_->page(13)};
  write_pages(truth);
  expect_exact(collect(target_->pid(), t), truth, {region()});
}

// The ledger (dirty/ledger.hpp): a collect whose generation was never
// committed (the tool died after it), or an arm by another chain of the same
// process, makes this chain's next collect save everything.
TEST_F(PagemapScan, ResetsByOthersAreFoundOut) {
  PagemapScanTracker t{plain()};
  state_.chain_id[0] = 0xa1;
  state_.generation = 1;
  arm(target_->pid(), t);
  // Generation 2 collects (resetting tracking) but is never committed.
  state_.prev_generation = 1;
  state_.generation = 2;
  write_pages({target_->page(3)});
  expect_exact(collect(target_->pid(), t), {target_->page(3)}, {region()});
  // Its retry starts again from generation 1: page 3 would be missed.
  write_pages({target_->page(4)});
  DirtySet d = collect(target_->pid(), t);
  EXPECT_TRUE(d.everything);
  EXPECT_NE(d.reason.find("reset by generation 2 of chain a1"), std::string::npos) << d.reason;
  // From there on it is exact again.
  state_.prev_generation = 2;
  state_.generation = 3;
  write_pages({target_->page(5)});
  expect_exact(collect(target_->pid(), t), {target_->page(5)}, {region()});

  arm_as_another_chain(0xb2);
  state_.prev_generation = 3;
  state_.generation = 4;
  d = collect(target_->pid(), t);
  EXPECT_TRUE(d.everything);
  EXPECT_NE(d.reason.find("reset by generation 1 of chain b2"), std::string::npos) << d.reason;
}

// The collect's ledger record is written before the freeze (claim_collect,
// in before_freeze): the collect that follows on the same tool is exact and
// writes nothing; any other collect from the same parent (this tool killed
// after its claim and run again, another chain, another run that claimed
// the same generation at the same moment) saves everything.
TEST_F(PagemapScan, AClaimBeforeTheFreezeIsOnlyItsOwnCollects) {
  PagemapScanTracker armer{plain()};
  state_.chain_id[0] = 0xc3;
  state_.generation = 1;
  arm(target_->pid(), armer);
  state_.prev_generation = 1;
  state_.generation = 2;
  write_pages({target_->page(3)});
  PagemapScanTracker t{plain()};
  t.before_freeze(target_->pid(), {}, state_);
  auto rec = read_ledger(target_->pid());
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->generation, 2u) << "not claimed before the freeze";
  write_pages({target_->page(4)});  // after the claim, before the freeze
  expect_exact(collect(target_->pid(), t), {target_->page(3), target_->page(4)}, {region()});

  // Generation 3 claimed by a tool killed before its collect; the next run
  // (generation 3 again, from 2) must not trust the tracking state.
  state_.prev_generation = 2;
  state_.generation = 3;
  write_pages({target_->page(5)});
  PagemapScanTracker killed{plain()};
  killed.before_freeze(target_->pid(), {}, state_);
  PagemapScanTracker again{plain()};
  DirtySet d = collect(target_->pid(), again);
  EXPECT_TRUE(d.everything) << "a collect trusted tracking another tool's claim covers";
  EXPECT_NE(d.reason.find("reset by generation 3 of chain c3"), std::string::npos) << d.reason;

  // Another chain arms between a claim and its collect: the collect finds
  // the record is no longer its claim.
  state_.prev_generation = 3;
  state_.generation = 4;
  PagemapScanTracker claimer{plain()};
  claimer.before_freeze(target_->pid(), {}, state_);
  arm_as_another_chain(0xd4);
  write_pages({target_->page(6)});
  d = collect(target_->pid(), claimer);
  EXPECT_TRUE(d.everything) << "a claim was trusted after another chain reset tracking";
  EXPECT_NE(d.reason.find("reset by generation 1 of chain d4"), std::string::npos) << d.reason;

  // Two runs of the same generation claim it at the same moment: both read
  // the parent's record, then both write a claim, the other's last. The
  // record names the same generation, but not this run's claim.
  // (Generation 4's collect above saved everything and recorded itself.)
  state_.prev_generation = 4;
  state_.generation = 5;
  PagemapScanTracker racer{plain()};
  racer.before_freeze(target_->pid(), {}, state_);
  auto claimed = read_ledger(target_->pid());
  ASSERT_TRUE(claimed.has_value());
  ASSERT_EQ(claimed->generation, 5u);
  ASSERT_NE(claimed->claim, 0u);
  LedgerEntry theirs = *claimed;
  theirs.claim ^= 0x5a5a;
  ASSERT_TRUE(write_ledger(target_->pid(), theirs).ok());
  write_pages({target_->page(7)});
  d = collect(target_->pid(), racer);
  EXPECT_TRUE(d.everything) << "a collect trusted another run's claim of its generation";
  EXPECT_NE(d.reason.find("claim of generation 5 was replaced"), std::string::npos) << d.reason;
}

// Adaptive write-protection (dirty/adaptive): the region's four 2 MiB-sized
// quarters flip between rewritten whole (hot: left unprotected, sampled now
// and then) and a few pages written; every collect, by a new tool run, must
// report every page written since the previous one. Once all is calm again,
// tracking is exact.
TEST_F(PagemapScan, AdaptiveHotAndColdNeverMissAWrite) {
  PagemapScanTracker::Options o;
  o.adaptive.enabled = true;
  PagemapScanTracker t(o);
  arm(target_->pid(), t);
  std::mt19937 rng(3);
  uint64_t most_hot = 0;
  const char* schedule[4] = {
      "HHHHHHHccccHHcc.........................", "HcHcHcHHHHHcccHc........................",
      "ccHHHHHHHHHHHHHHHHHHcc..................", "c.c.HH..HHHH.cc.........................c"};
  for (size_t round = 0; round < 41; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::set<uint64_t> truth;
    for (uint64_t q = 0; q < 4; ++q) {
      char what = schedule[q][std::min(round, std::strlen(schedule[q]) - 1)];
      if (what == 'H')
        for (uint64_t i = 0; i < 512; ++i) truth.insert(target_->page(q * 512 + i));
      if (what == 'c') {
        auto few = random_pages(rng, 3, q * 512, 512);
        truth.insert(few.begin(), few.end());
      }
    }
    write_pages(truth);
    PagemapScanTracker fresh(o);
    DirtySet d = collect(target_->pid(), fresh);
    ASSERT_FALSE(d.everything) << d.reason;
    expect_covers(d, truth);
    most_hot = std::max(most_hot, fresh.hot_bytes());
    if (round == 40) expect_exact(d, truth, {region()});
  }
  EXPECT_GE(most_hot, 2 * kAdaptiveBlock);  // adaptivity did take part
}

// Minor faults of `pid` so far (/proc/PID/stat field 10): a write to a
// write-protected page costs one.
uint64_t minor_faults(pid_t pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return 0;
  std::istringstream in(stat->substr(stat->rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 10 && in >> field; ++i) {
  }
  return std::strtoull(field.c_str(), nullptr, 10);
}

// A new full checkpoint of a process whose memory the last chain found hot
// arms those blocks on their sample only: rewriting them costs the program a
// few faults per block instead of one per page, and the new chain's first
// collect still reports every page written since the arm.
TEST_F(PagemapScan, ANewFullArmsBlocksFoundHotOnTheirSample) {
  PagemapScanTracker::Options o;
  o.adaptive.enabled = true;
  PagemapScanTracker t(o);
  arm(target_->pid(), t);
  std::set<uint64_t> all;
  for (uint64_t i = 0; i < kRegionPages; ++i) all.insert(target_->page(i));
  uint64_t hot = 0;
  for (int round = 0; round < 3; ++round) {  // tracked, sampled, hot
    write_pages(all);
    PagemapScanTracker fresh(o);
    DirtySet d = collect(target_->pid(), fresh);
    expect_covers(d, all);
    hot = fresh.hot_bytes();
  }
  ASSERT_GE(hot, 3 * kAdaptiveBlock) << "the region never became hot";

  // Another chain of the same process: its full arms, the program rewrites
  // everything, a few pages elsewhere too.
  state_.chain_id[0] ^= 0x5a;
  state_.generation = 1;
  state_.prev_generation = 0;
  PagemapScanTracker armer(o);
  arm(target_->pid(), armer);
  EXPECT_GE(armer.sampled_bytes(), 3 * kAdaptiveBlock);
  const uint64_t before = minor_faults(target_->pid());
  write_pages(all);
  const uint64_t faults = minor_faults(target_->pid()) - before;
  // Plain arming: one per page (2,048). Sampled: 32 per hot block, plus the
  // pages of clipped blocks too small to be hot (at most 256), plus the
  // target's own bookkeeping.
  EXPECT_LE(faults, 256u + 5 * 32 + 64);
  state_.prev_generation = 1;
  state_.generation = 2;
  PagemapScanTracker first(o);
  DirtySet d = collect(target_->pid(), first);
  ASSERT_FALSE(d.everything) << d.reason;
  expect_covers(d, all);

  // They stay measured: once the program calms down they go back to
  // tracking page by page, and the incrementals are exact again.
  std::mt19937 rng(11);
  for (int round = 0;; ++round) {
    ASSERT_LT(round, 40) << "hot blocks never calmed down";
    std::set<uint64_t> few = random_pages(rng, 5);
    write_pages(few);
    state_.prev_generation = state_.generation++;
    PagemapScanTracker next(o);
    d = collect(target_->pid(), next);
    expect_covers(d, few);
    if (next.hot_bytes() + next.sampled_bytes() == 0) break;
  }
  std::set<uint64_t> few = random_pages(rng, 5);
  write_pages(few);
  state_.prev_generation = state_.generation++;
  PagemapScanTracker last(o);
  expect_exact(collect(target_->pid(), last), few, {region()});
}

// A full that records its pages' hashes arms every block on its sample: a
// program writing after it faults a few times per block, not once per page.
// The first incremental protects the calm blocks while the program runs and
// compares what they read as written with the full's hashes, so its collect
// is still exact: pages changed before that (sampled or not), pages written
// after it, and not the pages rewritten with the same content.
TEST_F(PagemapScan, SampledArmIsVerifiedByContentBeforeTheFreeze) {
  PagemapScanTracker::Options o;
  o.adaptive.enabled = true;
  PagemapScanTracker armer(o);
  const std::vector<image::PageHash> hashes = arm_sampled(armer);
  EXPECT_GE(armer.sampled_bytes(), 3 * kAdaptiveBlock);

  // Every page of a block rewritten with its own content, except around the
  // sample runs (a block whose sample is mostly written is hot, not
  // verified), and 40 pages changed anywhere, a few samples among them.
  const uint64_t before = minor_faults(target_->pid());
  const uint64_t first_block = (target_->region() + kAdaptiveBlock - 1) & ~(kAdaptiveBlock - 1);
  for (uint64_t b = first_block; b + kAdaptiveBlock <= region().end(); b += kAdaptiveBlock)
    target_->run(Cmd{kRewrite, 0, b + 16 * kPage, 100 * kPage});
  std::mt19937 rng(5);
  std::set<uint64_t> changed = random_pages(rng, 40);
  write_pages(changed);
  const uint64_t faults = minor_faults(target_->pid()) - before;
  // Plain arming: 100 per block rewritten plus the 40 (440 or more). Sampled:
  // the pages of clipped blocks too small to be sampled, the 40, bookkeeping.
  EXPECT_LE(faults, 256u + 40 + 64);

  state_.prev_generation = 1;
  state_.generation = 2;
  PagemapScanTracker first(o);
  first.before_freeze(target_->pid(), hashes, state_);
  EXPECT_GE(first.verified_bytes(), 3 * kAdaptiveBlock);
  std::set<uint64_t> after = random_pages(rng, 20);  // while it still runs
  write_pages(after);
  changed.insert(after.begin(), after.end());
  expect_exact(collect(target_->pid(), first), changed, {region()});

  // Tracked page by page from now on.
  std::set<uint64_t> few = random_pages(rng, 7);
  write_pages(few);
  state_.prev_generation = state_.generation++;
  PagemapScanTracker next(o);
  expect_exact(collect(target_->pid(), next), few, {region()});
}

// A verification protects pages whose change only the verifying tool knows:
// a collect by any other (the verifying tool was killed, another chain)
// saves everything. Without one, the fresh blocks are reported whole.
TEST_F(PagemapScan, SampledArmWithoutItsVerificationMissesNothing) {
  PagemapScanTracker::Options o;
  o.adaptive.enabled = true;
  PagemapScanTracker armer(o);
  const std::vector<image::PageHash> hashes = arm_sampled(armer);
  std::mt19937 rng(6);
  std::set<uint64_t> changed = random_pages(rng, 30);
  write_pages(changed);
  state_.prev_generation = 1;
  state_.generation = 2;
  PagemapScanTracker killed(o);
  killed.before_freeze(target_->pid(), hashes, state_);
  ASSERT_GE(killed.verified_bytes(), 3 * kAdaptiveBlock);
  PagemapScanTracker other(o);
  DirtySet d = collect(target_->pid(), other);
  EXPECT_TRUE(d.everything) << "a collect trusted pages another tool protected";

  // A new chain, never verified: its first collect reports what reads as
  // written in the fresh blocks (pages protected since before this full and
  // not written since are not), which covers what changed.
  state_.chain_id[0] ^= 0x33;
  state_.generation = 1;
  state_.prev_generation = 0;
  PagemapScanTracker armer2(o);
  arm(target_->pid(), armer2);
  changed = random_pages(rng, 30);
  write_pages(changed);
  state_.prev_generation = 1;
  state_.generation = 2;
  PagemapScanTracker plain(o);
  d = collect(target_->pid(), plain);
  ASSERT_FALSE(d.everything) << d.reason;
  expect_covers(d, changed);
}

// KiB of the target's anonymous memory in PMD-mapped huge pages.
long thp_kb(pid_t pid) {
  auto rollup = read_file("/proc/" + std::to_string(pid) + "/smaps_rollup");
  if (!rollup.ok()) return -1;
  size_t at = rollup->find("AnonHugePages:");
  return at == std::string::npos ? 0 : std::strtol(rollup->c_str() + at + 14, nullptr, 10);
}

// Huge pages stay huge (dirty/huge_blocks): a write to a huge page after the
// arm and after a collect does not split it. Then three 2 MiB blocks flip
// between huge and small (MADV_COLLAPSE, a split by mprotect after
// MADV_NOHUGEPAGE, a dropped page, half of one unmapped and mapped again),
// go quiet (then protected whole) and are written again, and every collect,
// by a new tool run, must report every page changed since the previous one.
void PagemapScan::flip_huge_blocks(bool adaptive) {
  const uint64_t huge = kHugeBlock;
  const uint64_t aligned = (target_->region() + huge - 1) & ~(huge - 1);
  if (target_->run(Cmd{kHuge, 0, aligned, 3 * huge}).result != 0)
    GTEST_SKIP() << "MADV_COLLAPSE does not work here: no huge pages to test with";
  PagemapScanTracker::Options o;
  o.adaptive.enabled = adaptive;
  ASSERT_GE(thp_kb(target_->pid()), 6 * 1024);

  PagemapScanTracker t(o);
  arm(target_->pid(), t);
  auto block_page = [&](uint64_t b, uint64_t i) { return aligned + b * huge + i * kPage; };
  std::set<uint64_t> truth{block_page(0, 3), block_page(1, 100), block_page(2, 511)};
  write_pages(truth);
  EXPECT_GE(thp_kb(target_->pid()), 6 * 1024) << "a write after the arm split a huge page";
  DirtySet d = collect(target_->pid(), t);
  expect_covers(d, truth);
  truth = {block_page(0, 4), block_page(1, 101), block_page(2, 7)};
  write_pages(truth);
  EXPECT_GE(thp_kb(target_->pid()), 6 * 1024) << "a write after a collect split a huge page";

  // Per block and round: w three pages written; W all 512; s split, two
  // pages written; h collapsed again, one page written; d one page dropped,
  // one written; u the first half unmapped and mapped again, written; .
  // nothing (quiet: a huge block is then protected whole at the next collect).
  const char* schedule[3] = {"w..w.s.h..W.hw..d..h.w.", "...W..s.w.h.h..u.h.W..w",
                             "d.h.w...sW.h.....w..h.W"};
  std::mt19937 rng(5);
  uint64_t most_quiet = 0;
  for (size_t round = 0; round < std::strlen(schedule[0]); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::set<uint64_t> writes;
    for (uint64_t b = 0; b < 3; ++b) {
      const uint64_t base = aligned + b * huge;
      auto some = [&](size_t n) {
        for (size_t i = 0; i < n; ++i) writes.insert(block_page(b, rng() % 512));
      };
      switch (round < std::strlen(schedule[b]) ? schedule[b][round] : '.') {
        case 'w':
          some(3);
          break;
        case 'W':
          for (uint64_t i = 0; i < 512; ++i) writes.insert(block_page(b, i));
          break;
        case 's':
          ASSERT_EQ(target_->run(Cmd{kSplit, 0, base, huge}).result, 0);
          some(2);
          break;
        case 'h':
          (void)target_->run(Cmd{kHuge, 0, base, huge});  // refused while pages are protected
          some(1);
          break;
        case 'd': {
          uint64_t p = block_page(b, rng() % 512);
          ASSERT_EQ(target_->run(Cmd{kDontneed, 0, p, kPage}).result, 0);
          truth.insert(p);
          some(1);
          break;
        }
        case 'u':
          ASSERT_EQ(target_->run(Cmd{kUnmapMap, 0, base, huge / 2}).result, 0);
          for (uint64_t i = 0; i < 256; ++i) truth.insert(block_page(b, i));  // zero now
          some(2);
          break;
      }
    }
    write_pages(writes);
    truth.insert(writes.begin(), writes.end());
    PagemapScanTracker fresh(o);
    DirtySet d = collect(target_->pid(), fresh);
    ASSERT_FALSE(d.everything) << d.reason;
    expect_covers(d, truth);
    most_quiet = std::max(most_quiet, fresh.huge_quiet_bytes());
    truth.clear();
  }
  EXPECT_GE(most_quiet, huge) << "no quiet huge block was ever protected";
}

TEST_F(PagemapScan, HugePagesStayHugeAndNeverMissAWrite) {
  flip_huge_blocks(false);
}
TEST_F(PagemapScan, HugePagesStayHugeAndNeverMissAWriteAdaptive) {
  flip_huge_blocks(true);
}

// A huge block rewritten with the same content every interval looks quiet
// to the hash and gets protected; the next write splits it. The collect
// after that gives it back as one huge page, unprotected for good, and no
// write is missed meanwhile.
TEST_F(PagemapScan, HugeBlockRewrittenWithSameContentStaysHuge) {
  const uint64_t huge = kHugeBlock;
  const uint64_t aligned = (target_->region() + huge - 1) & ~(huge - 1);
  if (target_->run(Cmd{kHuge, 0, aligned, huge}).result != 0)
    GTEST_SKIP() << "MADV_COLLAPSE does not work here: no huge pages to test with";
  ASSERT_GE(thp_kb(target_->pid()), 2048);
  PagemapScanTracker t{plain()};
  arm(target_->pid(), t);
  uint64_t repaired = 0;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    target_->run(Cmd{kRewrite, 0, aligned, huge});
    std::set<uint64_t> truth{aligned + 5 * kPage + uint64_t(round) * kPage};  // one real change
    write_pages(truth);
    PagemapScanTracker fresh{plain()};
    DirtySet d = collect(target_->pid(), fresh);
    ASSERT_FALSE(d.everything) << d.reason;
    expect_covers(d, truth);
    repaired += fresh.huge_repaired_bytes();
  }
  // Writes with unchanged content are what the hash cannot see: the one
  // real change per round above is elsewhere in the block. This round only
  // rewrites, so its hash matches the last one.
  for (int round = 6; round < 10; ++round) {
    target_->run(Cmd{kRewrite, 0, aligned, huge});
    PagemapScanTracker fresh{plain()};
    collect(target_->pid(), fresh);
    repaired += fresh.huge_repaired_bytes();
  }
  EXPECT_GE(repaired, huge) << "the block was never judged quiet, protected and split";
  EXPECT_GE(thp_kb(target_->pid()), 2048) << "the rewritten block did not stay huge";
}

TEST(PagemapScanProbe, ReportsWhy) {
  FeatureCheck c = PagemapScanTracker::probe();
  EXPECT_EQ(c.name, "pagemap-scan");
  EXPECT_FALSE(c.detail.empty());
}

}  // namespace
}  // namespace ckpt::dirty
