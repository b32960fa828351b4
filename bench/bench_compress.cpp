// What --compress costs and saves (docs/performance.md, "Compression").
//
//   bench_compress [--mib N] [--dir DIR] [--threads T] [--levels L,L...] [--reps R]
//                  [--codec-only|--skip-codec]
//
// 1. The codec alone, on N MiB (default 256) of each data set, cut into 1 MiB
//    runs as the writer cuts them: stored/plain ratio, compression MB/s on T
//    threads (default 2), and check+decompress MB/s on one thread (what the
//    restore's verifier does), per zstd level (default 1,3).
// 2. Unless --codec-only: full checkpoint (the process released after the
//    copy, killed afterwards) and restore wall time of a process
//    holding N MiB of each data set, plain and --compress (level 1), files in
//    DIR (default /var/tmp), median of R (default 3) runs.
// Data sets: "mg-like" (a smooth 3-D field of full-precision doubles, as a
// multigrid solver's arrays), "cg-like" (a CSR matrix: ascending column
// indices, values, vectors), "sparse" (85 % of the pages zero, the rest a few
// non-zero words each), "random" (incompressible).
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ckpt/ckpt.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "image/format.hpp"
#include "image/page_codec.hpp"
#include "util/clock.hpp"
#include "util/hash.hpp"

namespace {

using ckpt::image::kPageSize;

void fill(const std::string& kind, uint8_t* p, size_t bytes) {
  std::mt19937_64 g(42);
  auto* d = reinterpret_cast<double*>(p);
  const size_t n = bytes / 8;
  if (kind == "mg-like") {
    const size_t side = size_t(std::cbrt(double(n)));
    for (size_t i = 0; i < n; ++i) {
      const double x = double(i % side) / side, y = double(i / side % side) / side,
                   z = double(i / side / side) / side;
      d[i] = std::sin(3.1 * x) * std::cos(2.3 * y) * std::exp(-z) + 1e-3 * std::sin(40 * x * y);
    }
  } else if (kind == "cg-like") {
    // Thirds: column indices (int32, ascending per row), values, vectors.
    auto* col = reinterpret_cast<int32_t*>(p);
    const size_t ncol = bytes / 3 / 4;
    std::uniform_int_distribution<int32_t> step(1, 400);
    int32_t c = 0;
    for (size_t i = 0; i < ncol; ++i) {
      if (i % 13 == 0) c = 0;
      col[i] = c += step(g);
    }
    std::uniform_real_distribution<double> u(0, 1);
    for (size_t i = ncol * 4 / 8 + 1; i < n; ++i) d[i] = u(g);
  } else if (kind == "sparse") {
    std::memset(p, 0, bytes);
    std::uniform_int_distribution<int> pct(0, 99), pos(0, kPageSize / 8 - 1);
    for (size_t pg = 0; pg < bytes / kPageSize; ++pg) {
      if (pct(g) < 85) continue;
      for (int k = 0; k < 16; ++k) d[pg * kPageSize / 8 + pos(g)] = double(pos(g)) * 0.5;
    }
  } else {
    for (size_t i = 0; i < n; ++i) reinterpret_cast<uint64_t*>(p)[i] = g();
  }
}

bool zero_page(const uint8_t* p) {
  for (size_t i = 0; i < kPageSize; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    if (v) return false;
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void codec(const std::string& kind, uint8_t* data, size_t bytes, const std::vector<int>& levels,
           unsigned threads) {
  // Non-zero pages only: zero pages never reach the page file either way.
  const size_t run = ckpt::image::kMaxRunPages * kPageSize;
  std::vector<const uint8_t*> runs;
  uint64_t plain = 0;
  for (size_t off = 0; off < bytes; off += run) {
    bool any = false;
    for (size_t pg = 0; pg < run && !any; pg += kPageSize) any = !zero_page(data + off + pg);
    if (any) runs.push_back(data + off), plain += run;
  }
  if (runs.empty()) return;
  const size_t bound = ckpt::image::RunCompressor::bound(run);
  auto* out = static_cast<uint8_t*>(std::aligned_alloc(kPageSize, bound * runs.size()));
  std::memset(out, 0,
              bound * runs.size());  // faulted in before timing, like the writer's reused buffer
  std::vector<uint8_t> back(run);
  {  // warm the contexts' allocations
    ckpt::image::RunCompressor warm(levels.front(), threads);
    std::vector<ckpt::image::RunCompressor::Job> j{{runs[0], run, out, 0}};
    warm.run(j);
  }
  for (int level : levels) {
    ckpt::image::RunCompressor c(level, threads);
    std::vector<ckpt::image::RunCompressor::Job> jobs;
    for (size_t i = 0; i < runs.size(); ++i) jobs.push_back({runs[i], run, out + i * bound, 0});
    const double t0 = ckpt::now_seconds();
    // The writer hands the compressor one add_pages call at a time: 8 MiB batches.
    for (size_t i = 0; i < jobs.size(); i += 8) {
      std::vector<ckpt::image::RunCompressor::Job> batch(
          jobs.begin() + i, jobs.begin() + std::min(i + 8, jobs.size()));
      c.run(batch);
      std::copy(batch.begin(), batch.end(), jobs.begin() + i);
    }
    const double tc = ckpt::now_seconds() - t0;
    uint64_t stored = 0;
    const double t1 = ckpt::now_seconds();
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].stored_pages == 0) {
        stored += run;
        (void)ckpt::xxh3(runs[i], run);
        continue;
      }
      stored += jobs[i].stored_pages * kPageSize;
      std::string why = ckpt::image::decompress_run(jobs[i].out, jobs[i].stored_pages * kPageSize,
                                                    back.data(), run);
      if (!why.empty() || ckpt::xxh3(back.data(), run) != ckpt::xxh3(runs[i], run)) {
        std::fprintf(stderr, "bench_compress: round trip failed: %s\n", why.c_str());
        std::exit(1);
      }
    }
    const double td = ckpt::now_seconds() - t1;
    std::printf("%-8s %5d %12.1f %12.1f %8.2f %12.0f %12.0f\n", kind.c_str(), level,
                double(plain) / 1048576, double(stored) / 1048576, double(plain) / double(stored),
                double(plain) / 1e6 / tc, double(plain) / 1e6 / td);
  }
  std::free(out);
}

pid_t start_target(const std::string& kind, size_t bytes) {
  int p[2];
  if (pipe(p) != 0) std::exit(2);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) _exit(1);
    fill(kind, static_cast<uint8_t*>(m), bytes);
    char c = 1;
    (void)!write(p[1], &c, 1);
    close(p[1]);
    for (;;) pause();
  }
  close(p[1]);
  char c;
  if (read(p[0], &c, 1) != 1) std::exit(2);
  close(p[0]);
  return pid;
}

void reap(pid_t pid) {
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
}

void dump_restore(const std::string& kind, size_t bytes, const std::string& dir, int reps) {
  for (int level : {0, 1}) {
    std::vector<double> ck, frozen, rs;
    uint64_t written = 0;
    for (int r = 0; r < reps; ++r) {
      const std::string ckdir = dir + "/ck";
      (void)!system(("rm -rf '" + ckdir + "'").c_str());
      pid_t pid = start_target(kind, bytes);
      ckpt::CheckpointOptions co;
      co.dir = ckdir;
      co.pid = pid;
      co.compress_level = level;
      auto cs = ckpt::checkpoint_full(co);
      if (!cs.ok()) {
        std::fprintf(stderr, "bench_compress: checkpoint: %s\n", cs.error().message.c_str());
        std::exit(1);
      }
      reap(pid);
      ck.push_back(cs->total_seconds);
      frozen.push_back(cs->frozen_seconds);
      written = cs->bytes_written;
      ckpt::RestoreOptions ro;
      ro.dir = ckdir;
      auto rr = ckpt::restore_process(ro);
      if (!rr.ok()) {
        std::fprintf(stderr, "bench_compress: restore: %s\n", rr.error().message.c_str());
        std::exit(1);
      }
      rs.push_back(rr->seconds);
      reap(rr->pid);
    }
    std::printf("%-8s %-6s %10.1f %9.3f %9.3f %10.3f\n", kind.c_str(), level ? "zstd-1" : "plain",
                double(written) / 1048576, median(ck), median(frozen), median(rs));
  }
  (void)!system(("rm -rf '" + dir + "/ck'").c_str());
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  std::string dir = "/var/tmp";
  unsigned threads = 2;
  int reps = 3;
  bool codec_only = false, skip_codec = false;
  std::vector<int> levels{1, 3};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_compress: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: bench_compress [--mib N] [--dir DIR] [--threads T] [--levels L,L...] [--reps R] "
          "[--codec-only|--skip-codec]\n"
          "zstd page compression: ratio and MB/s of the codec per data set and level, then full\n"
          "checkpoint and restore wall time plain vs --compress (docs/performance.md).\n");
      return 0;
    } else if (a == "--mib") {
      mib = std::stoul(next());
    } else if (a == "--dir") {
      dir = next();
    } else if (a == "--threads") {
      threads = unsigned(std::stoul(next()));
    } else if (a == "--reps") {
      reps = std::max(1, std::stoi(next()));
    } else if (a == "--levels") {
      levels.clear();
      std::string s = next();
      for (size_t at = 0; at < s.size();) {
        size_t e = s.find(',', at);
        levels.push_back(std::stoi(s.substr(at, e - at)));
        at = e == std::string::npos ? s.size() : e + 1;
      }
    } else if (a == "--skip-codec") {
      skip_codec = true;
    } else if (a == "--codec-only") {
      codec_only = true;
    } else {
      std::fprintf(stderr, "bench_compress: unknown argument %s (--help)\n", a.c_str());
      return 2;
    }
  }
  const size_t bytes = mib << 20;
  const std::vector<std::string> kinds{"mg-like", "cg-like", "sparse", "random"};
  std::printf("codec: %zu MiB per data set, 1 MiB runs, compression on %u threads\n", mib, threads);
  std::printf("%-8s %5s %12s %12s %8s %12s %12s\n", "data", "level", "plain MiB", "stored MiB",
              "ratio", "comp MB/s", "decomp MB/s");
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(kPageSize, bytes));
  for (const std::string& k : kinds) {
    if (skip_codec) break;
    fill(k, data, bytes);
    codec(k, data, bytes, levels, threads);
  }
  std::free(data);
  if (codec_only) return 0;
  dir += "/libckpt-bench-compress." + std::to_string(getpid());
  if (mkdir(dir.c_str(), 0700) != 0) {
    std::perror(dir.c_str());
    return 1;
  }
  std::printf("\nfull checkpoint and restore of %zu MiB, files in %s, median of %d\n", mib,
              dir.c_str(), reps);
  std::printf("%-8s %-6s %10s %9s %9s %10s\n", "data", "mode", "files MiB", "ckpt s", "frozen s",
              "restore s");
  for (const std::string& k : kinds) dump_restore(k, bytes, dir, reps);
  rmdir(dir.c_str());
  return 0;
}
