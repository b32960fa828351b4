// How long a checkpoint keeps its target frozen, against what copying the
// same memory costs, measured in one run (issue 14, items 3 and 4):
//   - a 100 %-dirty incremental of SIZE MiB (default 512) with the pages
//     streamed to the page file while frozen ("stream": a capture budget of
//     8 MiB, the four 2 MiB buffers the checkpoint used before) and with them
//     copied into the tool's memory first (the default budget), the writer
//     draining meanwhile ("capture+write") or only after the release
//     ("capture"; the default with one CPU, capture+write with more);
//   - memcpy of SIZE MiB into fresh memory and into memory already touched,
//     and process_vm_readv of the target's SIZE MiB into fresh memory;
//   - with --live-size MiB (default 1024, 0 to skip): cr_full and cr_full
//     --live of a process of that size that writes little (one page every
//     10 ms), frozen time of each.
// Conditions: "warm" (a file of 1.5 x SIZE written and deleted just before
// each checkpoint, so the page cache has memory at hand); medians of --reps.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ckpt/ckpt.hpp>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "incompressible.hpp"
#include "util/clock.hpp"

namespace {

// The target fills SIZE and then, on request through a shared mailbox,
// rewrites one word of every page (100 % dirty); with `trickle` it writes
// one word of a random page every 10 ms all along (a process that writes
// little).
struct Mailbox {
  volatile uint64_t seq, done;
};

struct Target {
  pid_t pid = 0;
  Mailbox* box = nullptr;
};

Target start_target(size_t bytes, const std::string& dir, bool trickle) {
  const std::string path = dir + "/mailbox";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) exit(2);
  Target t;
  t.box = static_cast<Mailbox*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  std::memset((void*)t.box, 0, sizeof(Mailbox));
  t.pid = fork();
  if (t.pid == 0) {
    syscall(SYS_close_range, 3u, ~0u, 0u);
    uint64_t* p = bench::map_incompressible(bytes);
    if (!p) _exit(1);
    uint64_t x = p[bytes / 8 - 1];
    const size_t pages = bytes / 4096;
    Mailbox* box = t.box;
    for (uint64_t seen = 0;;) {
      while (box->seq == seen) {
        timespec ts{0, trickle ? 10000000 : 100000};
        nanosleep(&ts, nullptr);
        if (trickle) {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
          p[(x % pages) * 512] = x;
        }
      }
      seen = box->seq;
      for (size_t k = 0; k < pages; k++) p[k * 512 + (seen & 511)] = x + k;
      __atomic_store_n(&box->done, seen, __ATOMIC_RELEASE);
    }
  }
  close(fd);
  return t;
}

void request(const Target& t) {
  uint64_t seq = t.box->seq + 1;
  __atomic_store_n(&t.box->seq, seq, __ATOMIC_RELEASE);
  while (__atomic_load_n(&t.box->done, __ATOMIC_ACQUIRE) != seq) usleep(100);
}

void stop(Target& t) {
  kill(t.pid, SIGKILL);
  int st;
  waitpid(t.pid, &st, 0);
  munmap((void*)t.box, 4096);
}

ckpt::CheckpointStats must(ckpt::Result<ckpt::CheckpointStats> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().message.c_str());
    exit(1);
  }
  return *r;
}

void sh(const std::string& cmd) {
  (void)!system(cmd.c_str());
}

void warm(const std::string& dir, size_t bytes) {
  sh("dd if=/dev/zero of='" + dir + "/warm' bs=8M count=" + std::to_string(bytes * 3 / 2 >> 23) +
     " status=none; rm -f '" + dir + "/warm'");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// memcpy of `bytes` into fresh anonymous memory (its first touch) or into
// memory touched before.
double copy_seconds(const uint8_t* src, size_t bytes, bool fresh) {
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) exit(2);
  if (!fresh) std::memset(m, 1, bytes);
  double t0 = ckpt::now_seconds();
  std::memcpy(m, src, bytes);
  double s = ckpt::now_seconds() - t0;
  munmap(m, bytes);
  return s;
}

double readv_seconds(pid_t pid, size_t bytes) {
  // Where the target's memory is: the largest mapping in its maps.
  FILE* f = fopen(("/proc/" + std::to_string(pid) + "/maps").c_str(), "r");
  unsigned long best = 0, best_len = 0, a, b;
  char line[512];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx", &a, &b) == 2 && b - a > best_len) best = a, best_len = b - a;
  if (f) fclose(f);
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  double t0 = ckpt::now_seconds();
  for (size_t off = 0; off < std::min<size_t>(bytes, best_len); off += 64 << 20) {
    size_t n = std::min<size_t>(64 << 20, bytes - off);
    iovec l{static_cast<uint8_t*>(m) + off, n}, r{reinterpret_cast<void*>(best + off), n};
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) < 0) break;
  }
  double s = ckpt::now_seconds() - t0;
  munmap(m, bytes);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 512, live_mib = 1024;
  int reps = 3;
  std::string base = "/var/tmp", tracker = "auto";
  bool direct = false;  // page file written with O_DIRECT: the disk's own rate
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h" || i + 1 >= argc) {
      std::printf(
          "bench_freeze [--size MiB] [--live-size MiB] [--reps N] [--dir DIR] [--tracker T]\n"
          "             [--direct 0|1]\n"
          "Frozen time of a 100%%-dirty incremental of SIZE MiB (default 512), pages streamed to\n"
          "disk while frozen vs copied into the tool's memory first, against memcpy and\n"
          "process_vm_readv of the same size; then cr_full vs cr_full --live of a LIVE-SIZE\n"
          "MiB process (default 1024; 0 skips) that writes one page every 10 ms.\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
    if (a == "--size")
      mib = std::stoul(argv[++i]);
    else if (a == "--live-size")
      live_mib = std::stoul(argv[++i]);
    else if (a == "--reps")
      reps = std::stoi(argv[++i]);
    else if (a == "--dir")
      base = argv[++i];
    else if (a == "--tracker")
      tracker = argv[++i];
    else if (a == "--direct")
      direct = argv[++i] == std::string("1");
  }
  const std::string dir = base + "/libckpt-bench-freeze." + std::to_string(getpid());
  mkdir(dir.c_str(), 0700);
  const size_t bytes = mib << 20;
  nlohmann::json out;

  // Copy floors.
  {
    uint64_t* src = bench::map_incompressible(bytes);
    std::vector<double> fresh, touched;
    for (int r = 0; r < reps; r++) {
      fresh.push_back(copy_seconds(reinterpret_cast<uint8_t*>(src), bytes, true));
      touched.push_back(copy_seconds(reinterpret_cast<uint8_t*>(src), bytes, false));
    }
    munmap(src, bytes);
    Target t = start_target(bytes, dir, false);
    request(t);
    std::vector<double> rv;
    for (int r = 0; r < reps; r++) rv.push_back(readv_seconds(t.pid, bytes));
    stop(t);
    std::printf("copying %zu MiB in memory (medians of %d):\n", mib, reps);
    std::printf("  memcpy into fresh memory        %8.1f ms\n", median(fresh) * 1e3);
    std::printf("  memcpy into touched memory      %8.1f ms\n", median(touched) * 1e3);
    std::printf("  process_vm_readv, fresh memory  %8.1f ms\n", median(rv) * 1e3);
    out["copy"] = {{"memcpy_fresh_seconds", median(fresh)},
                   {"memcpy_touched_seconds", median(touched)},
                   {"process_vm_readv_seconds", median(rv)}};
  }

  // 100 %-dirty incrementals, alternating the two modes.
  // stream: four 2 MiB buffers, the writer draining them while frozen (the
  // checkpoint before item 3); capture+write: the default budget, writer
  // running while frozen (the default with two CPUs or more); capture: the
  // writer waits for the release unless the budget runs out (the default
  // with one CPU); default: the library's own choice (buffers faulted in for
  // what reads as written; when the copy fits in them, the writer held and
  // a second reader).
  constexpr int kModes = 4;
  std::vector<double> frozen[kModes], total[kModes], peak[kModes];
  const char* names[kModes] = {"stream (8 MiB)", "capture+write", "capture", "default"};
  const char* keys[kModes] = {"stream", "capture_write", "capture", "default"};
  std::string used;
  for (int r = 0; r < reps; r++)
    for (int mode = 0; mode < kModes; mode++) {
      Target t = start_target(bytes, dir, false);
      request(t);
      ckpt::CheckpointOptions co;
      co.dir = dir + "/ck";
      co.pid = t.pid;
      co.tracker = tracker;
      sh("rm -rf '" + co.dir + "'");
      must(ckpt::checkpoint_full(co), "cr_full");
      request(t);  // every page written
      warm(dir, bytes);
      co.capture_bytes = mode == 0 ? int64_t(8) << 20 : -1;
      using Writer = ckpt::CaptureTuning::Writer;
      co.capture.writer = mode == 3 ? Writer::automatic : mode == 2 ? Writer::hold : Writer::drain;
      co.direct_io = direct;
      auto inc = must(ckpt::checkpoint_incremental(co), "cr_incr");
      used = inc.tracker;
      frozen[mode].push_back(inc.frozen_seconds);
      total[mode].push_back(inc.total_seconds);
      peak[mode].push_back(double(inc.capture_peak_bytes));
      stop(t);
    }
  std::printf("\n100%%-dirty incremental of %zu MiB (tracker %s, %s, warm, medians of %d):\n", mib,
              used.c_str(), direct ? "O_DIRECT" : "buffered", reps);
  std::printf("  %-16s %10s %10s %14s\n", "mode", "frozen ms", "total ms", "tool buffers");
  for (int mode = 0; mode < kModes; mode++) {
    std::printf("  %-16s %10.1f %10.1f %11.0f MiB\n", names[mode], median(frozen[mode]) * 1e3,
                median(total[mode]) * 1e3, median(peak[mode]) / 1048576.0);
    out[keys[mode]] = {{"frozen_seconds", median(frozen[mode])},
                       {"total_seconds", median(total[mode])},
                       {"buffer_bytes", median(peak[mode])}};
  }
  std::printf("  frozen, default / memcpy into touched memory: %.2f, into fresh memory: %.2f\n",
              median(frozen[3]) / out["copy"]["memcpy_touched_seconds"].get<double>(),
              median(frozen[3]) / out["copy"]["memcpy_fresh_seconds"].get<double>());

  // cr_full vs cr_full --live of a process that writes little.
  if (live_mib > 0) {
    const size_t lbytes = live_mib << 20;
    std::vector<double> lf[2], lt[2], rounds, pre_max;
    for (int r = 0; r < reps; r++)
      for (int mode = 0; mode < 2; mode++) {
        Target t = start_target(lbytes, dir, true);
        request(t);
        ckpt::CheckpointOptions co;
        co.dir = dir + "/live";
        co.pid = t.pid;
        co.tracker = tracker;
        co.live = mode == 1;
        sh("rm -rf '" + co.dir + "'");
        warm(dir, lbytes);
        auto st = must(ckpt::checkpoint_full(co), co.live ? "cr_full --live" : "cr_full");
        lf[mode].push_back(st.frozen_seconds);
        lt[mode].push_back(st.total_seconds);
        if (co.live) {
          rounds.push_back(double(st.live_rounds));
          pre_max.push_back(st.precopy_frozen_max_seconds);
        }
        stop(t);
      }
    std::printf("\ncr_full of %zu MiB writing one page per 10 ms (warm, medians of %d):\n",
                live_mib, reps);
    std::printf("  %-16s %10s %10s\n", "mode", "frozen ms", "total ms");
    for (int mode = 0; mode < 2; mode++)
      std::printf("  %-16s %10.1f %10.1f\n", mode ? "--live" : "plain", median(lf[mode]) * 1e3,
                  median(lt[mode]) * 1e3);
    std::printf("  --live: %.0f pre-copy rounds, longest pre-copy stop %.1f ms\n", median(rounds),
                median(pre_max) * 1e3);
    out["live"] = {{"mib", live_mib},
                   {"plain_frozen_seconds", median(lf[0])},
                   {"plain_total_seconds", median(lt[0])},
                   {"live_frozen_seconds", median(lf[1])},
                   {"live_total_seconds", median(lt[1])},
                   {"live_rounds", median(rounds)},
                   {"precopy_stop_max_seconds", median(pre_max)}};
  }
  sh("rm -rf '" + dir + "'");
  std::printf("%s\n",
              nlohmann::json({{"bench", "freeze"}, {"mib", mib}, {"results", out}}).dump().c_str());
  return 0;
}
