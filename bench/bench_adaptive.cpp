// What periodic incremental checkpoints cost an application, with the
// pagemap-scan tracker's adaptive write-protection (dirty/adaptive) off and
// on: an MG-like workload (rewrites most of its memory every second) and a
// CG-like one (writes about 1 % per second), incrementals every 1 s and
// every 10 s, all in one run; page content buffered or O_DIRECT (cr_run's
// default), or both, alternating within each rep.
//
// Per run: the workload's compute time (its own "seconds", frozen time
// included) against an uninterrupted run of the same workload, with and
// without the full checkpoint's freeze, its CPU time ratio, minor faults and
// system time (its own getrusage), the incrementals' frozen times and sizes.
// The checkpointed runs must print the same result as the uninterrupted one.
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ckpt/ckpt.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "util/clock.hpp"

namespace {

const char* kHelp =
    "usage: bench_adaptive [options]\n"
    "  Slowdown of an MG-like and a CG-like workload under periodic incremental\n"
    "  checkpoints (pagemap-scan tracker), adaptive write-protection off and on.\n"
    "  --workloads LIST   mg,sparse (default both)\n"
    "  --intervals LIST   seconds between incrementals (default 1,10)\n"
    "  --modes LIST       off,on (default both): adaptive tracking (TrackingOptions) for the run\n"
    "  --mg ARGS          arguments of bench/workloads/mg (default \"256 12\")\n"
    "  --sparse ARGS      arguments of bench/workloads/sparse (default \"100000 300 60\")\n"
    "  --bin DIR          where the workloads are (default: workloads/ next to this program)\n"
    "  --dir DIR          checkpoint directory (default /var/tmp/bench_adaptive); emptied\n"
    "  --tracker T        tracker of the chains (default pagemap-scan)\n"
    "  --reps N           run the whole plan N times, each checkpointed run against the\n"
    "                     uninterrupted run just before it; medians at the end (default 1)\n"
    "  --full-every N     every Nth checkpoint is a new full of the same process, as a\n"
    "                     policy of m incrementals per full does (default 0: the first only)\n"
    "  --live             live checkpoints (pre-copy while the program runs, then a\n"
    "                     short freeze), fulls and incrementals alike\n"
    "  --io LIST          buffered,direct (default buffered): how page content is\n"
    "                     written; direct is O_DIRECT, cr_run's default. Both: each\n"
    "                     checkpointed run of a rep once each way, against the same\n"
    "                     uninterrupted run\n"
    "  --direct           the same as --io direct\n"
    "  --json             one JSON object per run on stdout as well\n"
    "  --help             this text\n";

struct Run {
  double compute = 0, wall = 0, utime = 0, stime = 0;
  long minflt = 0;
  int incrementals = 0, fulls = 0, exit_code = -1;
  double frozen_full = 0;  // all fulls together
  double frozen_sum = 0, frozen_max = 0;
  uint64_t bytes_sum = 0;
  std::string result;  // the workload's "result:" line without its seconds
  std::string error;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, sep);)
    if (!x.empty()) out.push_back(x);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty()      ? 0
         : v.size() % 2 ? v[v.size() / 2]
                        : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `argv` with stdout into `out`; checkpoints it every `interval` s
// (0: never) once it printed "computing".
Run run(const std::vector<std::string>& argv, const std::string& out, double interval,
        const std::string& dir, const std::string& tracker, int full_every, bool live, bool direct,
        bool adaptive) {
  Run r;
  std::filesystem::remove_all(dir);
  ::unlink(out.c_str());  // never a previous run's "computing"
  const double t0 = ckpt::now_seconds();
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int null = ::open("/dev/null", O_RDONLY);
    if (fd < 0 || null < 0) ::_exit(126);
    ::dup2(null, 0);
    ::dup2(fd, 1);
    ::close_range(3, ~0u, 0);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  int status = 0;
  rusage ru{};
  bool done = false, reaped_elsewhere = false;
  auto poll_exit = [&] {
    if (done) return true;
    pid_t w = ::wait4(pid, &status, WNOHANG, &ru);
    // ECHILD: the checkpointer, tracing it when it ended, reaped it.
    if (w == pid || (w < 0 && errno == ECHILD)) done = true;
    reaped_elsewhere = w < 0;
    return done;
  };
  if (interval > 0) {
    while (!poll_exit() && slurp(out).find("computing\n") == std::string::npos) ::usleep(2000);
    ckpt::CheckpointOptions co;
    co.dir = dir;
    co.pid = pid;
    co.tracker = tracker;
    co.live = live;
    co.direct_io = direct;
    co.tracking.adaptive = adaptive;
    int taken = 0;
    double next = ckpt::now_seconds();
    while (!poll_exit()) {
      const bool full = taken == 0 || (full_every > 0 && taken % full_every == 0);
      auto st = full ? ckpt::checkpoint_full(co) : ckpt::checkpoint_incremental(co);
      if (!st.ok()) {
        if (poll_exit()) break;  // it ended meanwhile
        r.error = st.error().message;
        ::kill(pid, SIGKILL);
        continue;
      }
      if (full) {
        r.fulls++;
        r.frozen_full += st->frozen_seconds;
      } else {
        r.incrementals++;
        r.frozen_sum += st->frozen_seconds;
        r.frozen_max = std::max(r.frozen_max, st->frozen_seconds);
        r.bytes_sum += st->bytes_written;
      }
      taken++;
      // The next one `interval` after this one started (or right away when
      // this one took longer).
      next = std::max(next + interval, ckpt::now_seconds());
      while (!poll_exit() && ckpt::now_seconds() < next) ::usleep(5000);
    }
  }
  if (!done && ::wait4(pid, &status, 0, &ru) < 0) reaped_elsewhere = true;
  r.wall = ckpt::now_seconds() - t0;
  std::string text = slurp(out);
  // Exit status lost when reaped elsewhere: the program's own verdict then
  // (it prints "result:" and no "FAIL" only when its self-check passed).
  if (reaped_elsewhere)
    r.exit_code =
        text.find("result: ") != std::string::npos && text.find("FAIL") == std::string::npos ? 0
                                                                                             : 1;
  else
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // The program's own rusage line (wait4's is lost when reaped elsewhere).
  if (size_t u = text.rfind("rusage: "); u != std::string::npos)
    std::sscanf(text.c_str() + u, "rusage: minflt %ld user %lf sys %lf", &r.minflt, &r.utime,
                &r.stime);
  size_t at = text.rfind("result: ");
  if (at != std::string::npos) {
    std::string line = text.substr(at, text.find('\n', at) - at);
    size_t s = line.rfind("seconds ");
    if (s != std::string::npos) {
      r.compute = std::atof(line.c_str() + s + 8);
      r.result = line.substr(0, s);
    }
  }
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string workloads = "mg,sparse", intervals = "1,10", modes = "off,on";
  std::string mg_args = "256 12", sparse_args = "100000 300 60";
  std::string bin = std::filesystem::path(argv[0]).parent_path().string() + "/workloads";
  std::string dir = "/var/tmp/bench_adaptive", tracker = "pagemap-scan";
  std::string ios = "buffered";
  bool json = false, live = false;
  int full_every = 0, reps = 1;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_adaptive: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (a == "--workloads") {
      workloads = value();
    } else if (a == "--intervals") {
      intervals = value();
    } else if (a == "--modes") {
      modes = value();
    } else if (a == "--mg") {
      mg_args = value();
    } else if (a == "--sparse") {
      sparse_args = value();
    } else if (a == "--bin") {
      bin = value();
    } else if (a == "--dir") {
      dir = value();
    } else if (a == "--tracker") {
      tracker = value();
    } else if (a == "--full-every") {
      full_every = std::atoi(value().c_str());
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--json") {
      json = true;
    } else if (a == "--live") {
      live = true;
    } else if (a == "--io") {
      ios = value();
    } else if (a == "--direct") {
      ios = "direct";
    } else {
      std::fprintf(stderr, "bench_adaptive: unknown option %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  for (const std::string& io : split(ios, ','))
    if (io != "buffered" && io != "direct") {
      std::fprintf(stderr, "bench_adaptive: --io: buffered or direct, not %s\n", io.c_str());
      return 2;
    }
  bool bad = false;
  // Per workload, interval, mode and I/O: each rep's slowdown and the same
  // without the full's freeze, against that rep's own uninterrupted run.
  std::map<std::tuple<std::string, double, std::string, std::string>,
           std::vector<std::pair<double, double>>>
      slowdowns;
  std::printf("%-7s %-4s %-8s %8s %9s %8s %9s %6s %8s %9s %5s %6s %10s %10s %10s %9s  %s\n", "work",
              "adpt", "io", "interval", "compute s", "slowdown", "w/o full", "cpu x", "sys s",
              "minflt", "fulls", "incrs", "frozen avg", "frozen max", "full froz", "MB/incr",
              "result");
  for (const std::string& w : split(workloads, ',')) {
    std::vector<std::string> args{bin + "/" + w};
    for (const auto& x : split(w == "mg" ? mg_args : sparse_args, ' ')) args.push_back(x);
    if (::access(args[0].c_str(), X_OK) != 0) {
      std::fprintf(stderr, "bench_adaptive: no workload %s (see --bin)\n", args[0].c_str());
      return 2;
    }
    const std::string out = dir + ".out";
    std::vector<std::tuple<double, std::string, std::string>> plan{{0, "-", "-"}};
    for (const auto& iv : split(intervals, ','))
      for (const auto& m : split(modes, ','))
        for (const auto& io : split(ios, ',')) plan.push_back({std::atof(iv.c_str()), m, io});
    Run base;
    for (int rep = 0; rep < reps; ++rep)
      for (const auto& [interval, mode, io] : plan) {
        Run r =
            run(args, out, interval, dir, tracker, full_every, live, io == "direct", mode != "off");
        if (interval == 0) base = r;
        const bool same = r.result == base.result && !r.result.empty();
        if (!same || r.exit_code != 0 || !r.error.empty()) bad = true;
        const double slow = base.compute > 0 ? (r.compute / base.compute - 1) * 100 : 0;
        // The same without the full checkpoint's freeze: what the incrementals
        // and the tracking cost (the full is paid once per chain, not per interval).
        // CPU time (user + system) against the uninterrupted run's: what the
        // tracking costs the program itself, whatever else the host runs.
        const double cpu =
            base.utime + base.stime > 0 ? (r.utime + r.stime) / (base.utime + base.stime) : 0;
        const double slow_incr =
            base.compute > 0 ? ((r.compute - r.frozen_full) / base.compute - 1) * 100 : 0;
        if (interval > 0) slowdowns[{w, interval, mode, io}].push_back({slow, slow_incr});
        std::printf(
            "%-7s %-4s %-8s %8.0f %9.2f %7.1f%% %8.1f%% %6.2f %8.2f %9ld %5d %6d %9.3fs %9.3fs "
            "%9.3fs %9.1f  %s\n",
            w.c_str(), mode.c_str(), io.c_str(), interval, r.compute, slow, slow_incr, cpu, r.stime,
            r.minflt, r.fulls, r.incrementals, r.incrementals ? r.frozen_sum / r.incrementals : 0.0,
            r.frozen_max, r.frozen_full,
            r.incrementals ? double(r.bytes_sum) / r.incrementals / 1e6 : 0.0,
            !r.error.empty()   ? ("checkpoint failed: " + r.error).c_str()
            : r.exit_code != 0 ? ("exit " + std::to_string(r.exit_code)).c_str()
            : same             ? "same"
                               : "DIFFERENT");
        std::fflush(stdout);
        if (json) {
          nlohmann::json j{
              {"workload", w},
              {"adaptive", mode},
              {"io", io},
              {"interval_s", interval},
              {"compute_s", r.compute},
              {"slowdown_pct", slow},
              {"slowdown_without_full_pct", slow_incr},
              {"cpu_ratio", cpu},
              {"wall_s", r.wall},
              {"user_s", r.utime},
              {"sys_s", r.stime},
              {"minflt", r.minflt},
              {"fulls", r.fulls},
              {"incrementals", r.incrementals},
              {"frozen_full_s", r.frozen_full},
              {"frozen_avg_s", r.incrementals ? r.frozen_sum / r.incrementals : 0.0},
              {"frozen_max_s", r.frozen_max},
              {"bytes_per_incremental", r.incrementals ? r.bytes_sum / r.incrementals : 0},
              {"same_result", same},
              {"exit", r.exit_code},
              {"error", r.error}};
          std::printf("%s\n", j.dump().c_str());
          std::fflush(stdout);
        }
      }
    ::unlink(out.c_str());
  }
  if (reps > 1) {
    std::printf("\nmedians of %d reps (each against its own uninterrupted run):\n", reps);
    std::printf("%-7s %-4s %-8s %8s %9s %9s  %s\n", "work", "adpt", "io", "interval", "slowdown",
                "w/o full", "every rep's slowdown");
    for (auto& [key, v] : slowdowns) {
      std::vector<double> a, b;
      std::string all;
      for (auto [x, y] : v) {
        a.push_back(x);
        b.push_back(y);
        char one[32];
        std::snprintf(one, sizeof one, "%s%.1f%%", all.empty() ? "" : " ", x);
        all += one;
      }
      std::printf("%-7s %-4s %-8s %8.0f %8.1f%% %8.1f%%  %s\n", std::get<0>(key).c_str(),
                  std::get<2>(key).c_str(), std::get<3>(key).c_str(), std::get<1>(key), median(a),
                  median(b), all.c_str());
    }
  }
  return bad ? 1 : 0;
}
