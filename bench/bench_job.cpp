// A job of RANKS processes holding SIZE MiB in all (default 4 x 256 MiB)
// against a single process of the same SIZE, in the same run: frozen time,
// checkpoint time and restore time of each, medians of REPS alternating
// repetitions, and the job/single ratios. Prints a table and one JSON line.
//
//   bench_job [--size MiB] [--ranks N] [--dir DIR] [--reps N]
//
// The job is a root that forks RANKS children, each with SIZE/RANKS MiB of
// incompressible memory (like the ranks of an MPI job under mpirun); it is
// checkpointed with --tree (checkpoint_full with tree = true), killed, and
// restored as a whole. See docs/performance.md ("Jobs").
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ckpt/ckpt.hpp>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "image/store.hpp"
#include "incompressible.hpp"
#include "proc/tree.hpp"

namespace {

// A process with `bytes` of incompressible memory that waits to be killed;
// with ranks > 0 it forks that many such children instead (its own memory
// stays small). Returns once everything is populated.
pid_t start(size_t bytes, int ranks) {
  int p[2];
  if (pipe(p) != 0) std::exit(2);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    dup2(p[1], 3);
    syscall(SYS_close_range, 4u, ~0u, 0u);
    if (ranks == 0) {
      if (!bench::map_incompressible(bytes)) _exit(1);
      char c = 1;
      (void)!write(3, &c, 1);
    } else {
      for (int r = 0; r < ranks; ++r)
        if (fork() == 0) {
          if (!bench::map_incompressible(bytes / size_t(ranks))) _exit(1);
          char c = 1;
          (void)!write(3, &c, 1);
          close(3);
          for (;;) pause();
        }
    }
    close(3);
    for (;;) pause();
  }
  close(p[1]);
  char c;
  for (int n = 0; n < std::max(ranks, 1); ++n)
    if (read(p[0], &c, 1) != 1) std::exit(2);
  close(p[0]);
  return pid;
}

// Kills a job started by start() or restored as our child, and waits until
// none of its PIDs exists (restore needs them back).
void kill_all(pid_t root) {
  std::vector<pid_t> pids = {root};
  for (pid_t c : ckpt::proc::children_of(root)) pids.push_back(c);
  for (pid_t p : pids) kill(p, SIGKILL);
  waitpid(root, nullptr, 0);
  for (int i = 0; i < 1000; ++i) {
    bool any = false;
    for (pid_t p : pids) any |= kill(p, 0) == 0;
    if (!any) return;
    usleep(10000);
  }
}

struct Sample {
  double frozen = 0, checkpoint = 0, restore = 0;
};

Sample measure(const std::string& dir, size_t bytes, int ranks) {
  pid_t root = start(bytes, ranks);
  ckpt::CheckpointOptions co;
  co.dir = dir;
  co.pid = root;
  co.tree = ranks > 0;
  co.tracker = "hash";  // no tracking set-up in the figures: the same for both
  auto c = ckpt::checkpoint_full(co);
  if (!c.ok()) {
    std::fprintf(stderr, "bench_job: checkpoint: %s\n", c.error().message.c_str());
    std::exit(1);
  }
  kill_all(root);
  ckpt::RestoreOptions ro;
  ro.dir = dir;
  auto r = ckpt::restore_process(ro);
  if (!r.ok()) {
    std::fprintf(stderr, "bench_job: restore: %s\n", r.error().message.c_str());
    std::exit(1);
  }
  kill_all(r->pid);
  std::string cmd = "rm -rf '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) std::exit(1);
  return {c->frozen_seconds, c->total_seconds, r->seconds};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  int ranks = 4, reps = 3;
  std::string dir = "/var/tmp/bench_job";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: bench_job [--size MiB] [--ranks N] [--dir DIR] [--reps N]\n"
          "A job of N processes (default 4) holding MiB in all (default 1024) against one\n"
          "process of the same size: frozen, checkpoint and restore times, medians of\n"
          "alternating repetitions, and the job/single ratios. Needs root.\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_job: %s needs a value\n", a.c_str());
      return 2;
    }
    if (a == "--size")
      mib = std::stoul(argv[++i]);
    else if (a == "--ranks")
      ranks = std::stoi(argv[++i]);
    else if (a == "--dir")
      dir = argv[++i];
    else if (a == "--reps")
      reps = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "bench_job: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (ranks < 1 || reps < 1 || mib < size_t(ranks)) {
    std::fprintf(stderr, "bench_job: need --ranks >= 1, --reps >= 1, --size >= ranks\n");
    return 2;
  }
  const size_t bytes = mib << 20;
  ::mkdir(dir.c_str(), 0700);  // the two checkpoint directories go inside
  std::vector<double> sf, sc, sr, jf, jc, jr;
  for (int k = 0; k < reps; ++k) {
    Sample s = measure(dir + "/single", bytes, 0);
    Sample j = measure(dir + "/job", bytes, ranks);
    sf.push_back(s.frozen), sc.push_back(s.checkpoint), sr.push_back(s.restore);
    jf.push_back(j.frozen), jc.push_back(j.checkpoint), jr.push_back(j.restore);
    std::fprintf(stderr, "rep %d: single %.3f/%.3f/%.3f s, job %.3f/%.3f/%.3f s\n", k + 1, s.frozen,
                 s.checkpoint, s.restore, j.frozen, j.checkpoint, j.restore);
  }
  double m[6] = {median(sf), median(sc), median(sr), median(jf), median(jc), median(jr)};
  std::printf("%zu MiB: 1 process vs a job of %d processes (medians of %d)\n", mib, ranks, reps);
  std::printf("%-12s %10s %10s %8s\n", "", "single s", "job s", "job/single");
  const char* names[3] = {"frozen", "checkpoint", "restore"};
  for (int i = 0; i < 3; ++i)
    std::printf("%-12s %10.3f %10.3f %8.2f\n", names[i], m[i], m[i + 3], m[i + 3] / m[i]);
  nlohmann::json j = {{"size_mib", mib},
                      {"ranks", ranks},
                      {"reps", reps},
                      {"single_frozen_s", m[0]},
                      {"single_checkpoint_s", m[1]},
                      {"single_restore_s", m[2]},
                      {"job_frozen_s", m[3]},
                      {"job_checkpoint_s", m[4]},
                      {"job_restore_s", m[5]}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
