// Full checkpoint and restore of a process with SIZE MiB populated (default
// 1024), next to the raw limit measured in the same run: process_vm_readv of
// the same ranges + writing the same bytes to the same filesystem (+ fsync,
// which a checkpoint also pays). Prints a table and one JSON line.
//
//   bench_full [--size MiB] [--dir DIR] [--reps N]
//
// Each repetition measures raw, checkpoint and restore back to back under the
// same memory condition: "warm" (a large file was just written and deleted, so
// the page cache has memory at hand) or "cold" (idle for a few seconds first,
// which on these VMs hands freed memory back to the host). See
// docs/performance.md.
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
#include "usage.hpp"

#include "dump/memory.hpp"
#include "image/store.hpp"
#include "incompressible.hpp"
#include "proc/maps.hpp"
#include "util/clock.hpp"

namespace {

// The target: SIZE MiB of incompressible data, then it waits to be killed.
pid_t start_target(size_t bytes, int ready_fd_w) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Hold only stdio and the ready pipe (moved to fd 3, closed once used).
  dup2(ready_fd_w, 3);
  ready_fd_w = 3;
  syscall(SYS_close_range, 4u, ~0u, 0u);
  if (!bench::map_incompressible(bytes)) _exit(1);
  char c = 1;
  (void)!write(ready_fd_w, &c, 1);
  close(ready_fd_w);
  for (;;) pause();
}

void run_clean_target(pid_t* pid, size_t bytes) {
  int p[2];
  if (pipe(p) != 0) exit(2);
  *pid = start_target(bytes, p[1]);
  close(p[1]);
  char c;
  if (read(p[0], &c, 1) != 1) exit(2);
  close(p[0]);
}

void kill_and_reap(pid_t pid) {
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
}

// Write and delete a file of `bytes` on the benchmark's filesystem.
void warm_up(const std::string& dir, size_t bytes) {
  std::string path = dir + "/warm.tmp";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char> buf(64 << 20, 1);
  for (size_t done = 0; done < bytes; done += buf.size()) (void)!write(fd, buf.data(), buf.size());
  close(fd);
  unlink(path.c_str());
}

// The raw floor: read the same ranges with process_vm_readv and write them.
double raw_copy(pid_t pid, const std::string& dir) {
  auto maps = ckpt::proc::read_maps(pid);
  std::vector<ckpt::image::VmaRecord> vmas;
  for (const auto& m : *maps)
    if (m.path.empty() && m.w) vmas.push_back({m.start, m.end, 3, 0});
  double t0 = ckpt::now_seconds();
  auto plan = ckpt::dump::plan_memory(pid, vmas);
  std::string path = dir + "/raw.tmp";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const size_t chunk = 8 << 20;
  std::vector<char> buf(chunk);
  for (const auto& r : plan->ranges) {
    for (uint64_t off = 0; off < r.len; off += chunk) {
      size_t n = std::min<uint64_t>(chunk, r.len - off);
      iovec l{buf.data(), n}, rem{reinterpret_cast<void*>(r.addr + off), n};
      if (process_vm_readv(pid, &l, 1, &rem, 1, 0) != ssize_t(n)) exit(3);
      if (write(fd, buf.data(), n) != ssize_t(n)) exit(3);
    }
  }
  fsync(fd);
  double t = ckpt::now_seconds() - t0;
  close(fd);
  unlink(path.c_str());
  return t;
}

void rm_rf_ckpt(const std::string& dir) {
  std::string cmd = "rm -rf '" + dir + "/ck'";
  (void)!system(cmd.c_str());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  std::string dir = "/var/tmp";
  int reps = 3;
  bool direct = false;
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    const bool known = a == "--size" || a == "--dir" || a == "--reps" || a == "--io";
    if (!known || i + 1 >= argc)
      return usage_exit(
          "bench_full", a,
          "usage: bench_full [--size MiB] [--dir DIR] [--reps N] [--io buffered|direct]\n"
          "Full checkpoint and restore of a process holding MiB (default 1024) of\n"
          "populated memory, warm and cold page cache, against a raw write of the\n"
          "same bytes; medians of N runs (default 3); files under DIR (/var/tmp).\n"
          ""
          "\n");
    if (a == "--size") mib = std::stoul(argv[i + 1]);
    if (a == "--dir") dir = argv[i + 1];
    if (a == "--reps") reps = std::stoi(argv[i + 1]);
    if (a == "--io") direct = std::string(argv[i + 1]) == "direct";
  }
  dir += "/libckpt-bench." + std::to_string(getpid());
  mkdir(dir.c_str(), 0700);
  const size_t bytes = mib << 20;
  const double gb = double(bytes) / 1e9;
  nlohmann::json results = nlohmann::json::object();

  std::printf("full checkpoint / restore of %zu MiB populated memory, files in %s, %s I/O\n", mib,
              dir.c_str(), direct ? "O_DIRECT" : "buffered");
  std::printf("%-6s %9s %9s %9s %9s %13s %13s %14s\n", "cond", "raw GB/s", "ckpt GB/s", "ckpt/raw",
              "frozen s", "restore GB/s", "restore/ckpt", "from-disk GB/s");
  for (const char* cond : {"warm", "cold"}) {
    std::vector<double> raw, ck, frozen, rs, rs_disk;
    for (int rep = 0; rep < reps; ++rep) {
      pid_t pid;
      run_clean_target(&pid, bytes);
      bool warm = std::strcmp(cond, "warm") == 0;
      auto prepare = [&] {
        if (warm)
          warm_up(dir, bytes + bytes / 2);
        else
          sleep(4);
      };
      prepare();
      raw.push_back(raw_copy(pid, dir));

      prepare();
      ckpt::CheckpointOptions co;
      co.dir = dir + "/ck";
      co.pid = pid;
      co.direct_io = direct;
      auto cs = ckpt::checkpoint_full(co);
      if (!cs.ok()) {
        std::fprintf(stderr, "checkpoint: %s\n", cs.error().message.c_str());
        return 1;
      }
      ck.push_back(cs->total_seconds);
      frozen.push_back(cs->frozen_seconds);
      kill_and_reap(pid);

      ckpt::RestoreOptions ro;
      ro.dir = dir + "/ck";
      auto r = ckpt::restore_process(ro);
      if (!r.ok()) {
        std::fprintf(stderr, "restore: %s\n", r.error().message.c_str());
        return 1;
      }
      rs.push_back(r->seconds);
      kill_and_reap(r->pid);
      // Again with the image out of the page cache: a restore on another node
      // or after a reboot reads it from the disk.
      sync();
      if (FILE* f = fopen("/proc/sys/vm/drop_caches", "w")) {
        fputs("1", f);
        fclose(f);
      }
      auto rc = ckpt::restore_process(ro);
      if (!rc.ok()) {
        std::fprintf(stderr, "restore: %s\n", rc.error().message.c_str());
        return 1;
      }
      rs_disk.push_back(rc->seconds);
      kill_and_reap(rc->pid);
      rm_rf_ckpt(dir);
    }
    double raw_m = median(raw), ck_m = median(ck), rs_m = median(rs);
    double rd_m = median(rs_disk);
    std::printf("%-6s %9.2f %9.2f %9.2f %9.3f %13.2f %13.2f %14.2f\n", cond, gb / raw_m, gb / ck_m,
                raw_m / ck_m, median(frozen), gb / rs_m, ck_m / rs_m, gb / rd_m);
    results[cond] = {{"raw_seconds", raw_m},
                     {"checkpoint_seconds", ck_m},
                     {"frozen_seconds", median(frozen)},
                     {"restore_seconds", rs_m},
                     {"checkpoint_vs_raw", raw_m / ck_m},
                     {"restore_vs_checkpoint", ck_m / rs_m},
                     {"restore_from_disk_seconds", rd_m},
                     {"reps", reps}};
  }
  rmdir(dir.c_str());
  std::printf("%s\n", nlohmann::json({{"bench", "full"},
                                      {"mib", mib},
                                      {"io", direct ? "direct" : "buffered"},
                                      {"results", results}})
                          .dump()
                          .c_str());
  return 0;
}
