// Incremental checkpoints of a process with SIZE MiB populated (default
// 1024), per tracker and dirty fraction, measured in one run:
//   - incremental time, bytes written and frozen time vs the full checkpoint;
//   - restore from full + 3 incrementals vs restore from one full of the same
//     final state (the chain folded by cr_compact);
//   - the workload's own cost of writing pages while tracked vs untracked.
//
//   bench_incr [--size MiB] [--dir DIR] [--trackers pagemap-scan,hash]
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ckpt/check.hpp>
#include <ckpt/ckpt.hpp>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>
#include "usage.hpp"

#include "incompressible.hpp"
#include "util/clock.hpp"

namespace {

// The target: fills SIZE, then serves commands through a mailbox in a shared
// file mapping (pipes on fds > 2 cannot be checkpointed yet): a fraction f =
// write that fraction of its pages (random ones); it answers with the seconds
// that took.
struct Mailbox {
  volatile uint64_t seq, done;
  volatile double fraction, seconds;
};

struct Target {
  pid_t pid = 0;
  Mailbox* box = nullptr;
};

Target start_target(size_t bytes, const std::string& dir) {
  const std::string path = dir + "/mailbox";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, 4096) != 0) exit(2);
  Target t;
  t.box = static_cast<Mailbox*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  std::memset((void*)t.box, 0, sizeof(Mailbox));
  t.pid = fork();
  if (t.pid == 0) {
    syscall(SYS_close_range, 3u, ~0u, 0u);  // the mapping stays; no stray fds
    uint64_t* p = bench::map_incompressible(bytes);
    if (!p) _exit(1);
    uint64_t x = p[bytes / 8 - 1];  // the generator goes on from the fill's last word
    const size_t pages = bytes / 4096;
    Mailbox* box = t.box;
    box->done = 0;
    for (uint64_t seen = 0;;) {
      while (box->seq == seen) {
        timespec ts{0, 100000};
        nanosleep(&ts, nullptr);
      }
      seen = box->seq;
      const double f = box->fraction;
      double t0 = ckpt::now_seconds();
      size_t n = size_t(f * double(pages));
      for (size_t k = 0; k < n; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t page = f >= 1.0 ? k : size_t(x % pages);
        p[page * 512 + (x & 511)] = x;
      }
      box->seconds = ckpt::now_seconds() - t0;
      __atomic_store_n(&box->done, seen, __ATOMIC_RELEASE);
    }
  }
  close(fd);
  return t;
}

double dirty(const Target& t, double f) {
  uint64_t seq = t.box->seq + 1;
  t.box->fraction = f;
  __atomic_store_n(&t.box->seq, seq, __ATOMIC_RELEASE);
  while (__atomic_load_n(&t.box->done, __ATOMIC_ACQUIRE) != seq) usleep(100);
  return t.box->seconds;
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

double restore_seconds(const std::string& dir) {
  ckpt::RestoreOptions ro;
  ro.dir = dir;
  auto r = ckpt::restore_process(ro);
  if (!r.ok()) {
    std::fprintf(stderr, "restore: %s\n", r.error().message.c_str());
    exit(1);
  }
  kill(r->pid, SIGKILL);
  int st;
  waitpid(r->pid, &st, 0);
  return r->seconds;
}

void sh(const std::string& cmd) {
  (void)!system(cmd.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  std::string base = "/var/tmp", trackers = "pagemap-scan,hash";
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    const bool known = a == "--size" || a == "--dir" || a == "--trackers";
    if (!known || i + 1 >= argc)
      return usage_exit("bench_incr", a,
                        "usage: bench_incr [--size MiB] [--dir DIR] [--trackers LIST]\n"
                        "Incremental checkpoints of a process holding MiB (default 1024) after it\n"
                        "wrote 0.1 % to 100 % of it, per tracker (default pagemap-scan,hash;\n"
                        "kernel trackers this machine lacks are skipped, saying why); files under\n"
                        "DIR (default /var/tmp).\n"
                        ""
                        "\n");
    if (a == "--size") mib = std::stoul(argv[i + 1]);
    if (a == "--dir") base = argv[i + 1];
    if (a == "--trackers") trackers = argv[i + 1];
  }
  const std::string dir = base + "/libckpt-bench-incr." + std::to_string(getpid());
  mkdir(dir.c_str(), 0700);
  const size_t bytes = mib << 20;
  nlohmann::json out = nlohmann::json::object();
  std::printf("incremental checkpoints of %zu MiB populated memory, files in %s\n", mib,
              dir.c_str());

  std::stringstream ts(trackers);
  std::string tracker;
  while (std::getline(ts, tracker, ',')) {
    bool usable = tracker == "hash";
    for (const auto& c : ckpt::check_system())
      if (c.name == tracker) usable = c.ok;
    if (!usable) {
      std::printf("\n%s: not usable on this kernel, skipped\n", tracker.c_str());
      continue;
    }
    nlohmann::json tj;
    std::printf("\ntracker %s\n", tracker.c_str());
    std::printf("%-8s %10s %10s %12s %10s %14s\n", "dirty", "incr s", "incr/full", "bytes",
                "frozen ms", "app write x");
    const double fractions[] = {0.001, 0.01, 0.1, 1.0};
    for (double f : fractions) {
      Target t = start_target(bytes, dir);
      dirty(t, 0);  // wait until it is filled and serving
      // The workload's own cost of this write pattern, untracked...
      double untracked = dirty(t, f);
      ckpt::CheckpointOptions co;
      co.dir = dir + "/ck";
      co.pid = t.pid;
      co.tracker = tracker;
      sh("rm -rf '" + co.dir + "'");
      auto full = must(ckpt::checkpoint_full(co), "cr_full");
      // ... and tracked (the first write to each page since the checkpoint).
      double tracked = dirty(t, f);
      auto inc = must(ckpt::checkpoint_incremental(co), "cr_incr");
      std::printf("%-8s %10.4f %10.4f %12llu %10.2f %14.2f\n",
                  (std::to_string(f * 100).substr(0, 5) + "%").c_str(), inc.total_seconds,
                  inc.total_seconds / full.total_seconds, (unsigned long long)inc.bytes_written,
                  inc.frozen_seconds * 1e3, tracked / untracked);
      tj[std::to_string(f)] = {{"full_seconds", full.total_seconds},
                               {"full_frozen_seconds", full.frozen_seconds},
                               {"incremental_seconds", inc.total_seconds},
                               {"incremental_vs_full", inc.total_seconds / full.total_seconds},
                               {"bytes_written", inc.bytes_written},
                               {"frozen_seconds", inc.frozen_seconds},
                               {"app_write_untracked_seconds", untracked},
                               {"app_write_tracked_seconds", tracked},
                               {"app_slowdown", tracked / untracked}};
      if (f == 0.01) {
        // Restore: full + 3 incrementals at 1 % vs one full of that state.
        for (int k = 0; k < 2; k++) {
          dirty(t, f);
          must(ckpt::checkpoint_incremental(co), "cr_incr");
        }
        stop(t);
        double chain = restore_seconds(co.dir);
        sh("rm -rf '" + dir + "/flat' && cp -a '" + co.dir + "' '" + dir + "/flat'");
        if (auto c = ckpt::compact_chain(dir + "/flat"); !c.ok()) {
          std::fprintf(stderr, "compact: %s\n", c.error().message.c_str());
          return 1;
        }
        sh("sync");
        double flat = restore_seconds(dir + "/flat");
        chain = restore_seconds(co.dir);  // again, both with a warm page cache
        std::printf(
            "restore: full + 3 incrementals %.3f s, one full of the same state %.3f s, "
            "ratio %.2f\n",
            chain, flat, chain / flat);
        tj["restore"] = {{"chain_seconds", chain}, {"full_seconds", flat}, {"ratio", chain / flat}};
      } else {
        stop(t);
      }
    }
    out[tracker] = tj;
  }
  sh("rm -rf '" + dir + "'");
  std::printf(
      "%s\n",
      nlohmann::json({{"bench", "incremental"}, {"mib", mib}, {"results", out}}).dump().c_str());
  return 0;
}
