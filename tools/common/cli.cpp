#include "common/cli.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>

#include "util/clock.hpp"

namespace ckpt::cli {

int fail(const std::string& tool, const std::string& message) {
  progress_done();
  // One line whatever the cause quotes (a message may carry names read from
  // an image or the command line): control bytes are written as \xNN.
  std::string line;
  for (unsigned char c : message) {
    if (c >= 0x20 && c != 0x7f) {
      line += char(c);
      continue;
    }
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02x", c);
    line += b;
  }
  std::fprintf(stderr, "%s: %s\n", tool.c_str(), line.c_str());
  return 1;
}

int usage_error(const std::string& tool, const std::string& message) {
  std::fprintf(stderr, "%s: %s (see --help)\n", tool.c_str(), message.c_str());
  return 2;
}

int fail(const std::string& tool, const Error& e) {
  return fail(tool, e.message);
}

namespace {
bool g_line_drawn = false;  // tools are single-threaded mains: one line per process
}

ProgressFn progress_line(const std::string& verb) {
  if (!::isatty(STDERR_FILENO)) return {};
  auto start = std::make_shared<double>(now_seconds());
  auto last = std::make_shared<double>(0.0);
  return [verb, start, last](uint64_t done, uint64_t total) {
    double now = now_seconds();
    if (now - *start < 0.5 || (now - *last < 0.1 && done < total)) return;
    *last = now;
    double pct = total ? 100.0 * double(done) / double(total) : 100.0;
    double rate = double(done) / (now - *start) / 1e9;
    std::fprintf(stderr, "\r%s %llu / %llu MiB (%3.0f%%, %.2f GB/s)  ", verb.c_str(),
                 (unsigned long long)(done >> 20), (unsigned long long)(total >> 20), pct, rate);
    g_line_drawn = true;
  };
}

void progress_done() {
  if (g_line_drawn) std::fprintf(stderr, "\r\033[K");
  g_line_drawn = false;
}

nlohmann::json stats_json(const CheckpointStats& s) {
  return {{"generation", s.generation},
          {"parent_generation", s.parent_generation},
          {"kind", s.parent_generation ? "incremental" : "full"},
          {"processes", s.processes},
          {"tracker", s.tracker},
          {"tracker_reset", s.tracker_reset},
          {"frozen_seconds", s.frozen_seconds},
          {"memory_seconds", s.memory_seconds},
          {"total_seconds", s.total_seconds},
          {"vmas", s.vmas},
          {"pages_scanned", s.pages_scanned},
          {"pages_skipped", s.pages_skipped},
          {"pages_written", s.pages_written},
          {"pages_zero", s.pages_zero},
          {"pages_unchanged", s.pages_unchanged},
          {"bytes_written", s.bytes_written},
          {"capture_peak_bytes", s.capture_peak_bytes},
          {"live_rounds", s.live_rounds},
          {"precopy_bytes", s.precopy_bytes},
          {"precopy_frozen_max_seconds", s.precopy_frozen_max_seconds},
          {"live_stop", s.live_stop},
          {"members_changed", s.members_changed}};
}

void print_json(const nlohmann::json& j) {
  std::cout << j.dump() << std::endl;
}

void add_checkpoint_options(CLI::App& app, const std::string& tool, CheckpointOptions& opts,
                            bool& json, const std::string& dir_help,
                            const std::string& tracker_help) {
  app.add_option("--dir", opts.dir, dir_help)->required();
  app.add_option("pid", opts.pid, "process to checkpoint (with --tree: the root of the job)")
      ->required();
  app.add_flag("--tree", opts.tree, "the process and all its descendants, as one job");
  app.add_flag("--kill", opts.kill_after, "end the process after a successful checkpoint");
  app.add_flag("--json", json, "print statistics as JSON on stdout");
  app.add_flag("--tcp-established", opts.tcp_established,
               "save TCP connections to peers outside the job in repair mode (docs/nodes.md)");
  app.add_flag("--live", opts.live,
               "copy memory while the process runs, then freeze it only for what it wrote since");
  app.add_option_function<uint64_t>(
         "--scratch-max", [&opts](uint64_t mib) { opts.scratch_max_bytes = mib << 20; },
         "MiB of files on tmpfs and in temporary directories saved with each checkpoint, per "
         "process (default 512)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 30));
  // Level 1 by default: docs/performance.md ("Compression") measured it
  // against 3 on the same data.
  app.add_flag("--compress{1}", opts.compress_level,
               "store page content zstd-compressed, level 1-19 (--compress alone: 1); "
               "restore checks and decompresses it")
      ->check(CLI::Range(1, 19));
  app.add_flag("--no-sync", opts.no_sync,
               "skip the fsyncs: faster, but an OS crash or power loss may lose this generation "
               "(a killed tool never leaves a half one visible)");
  app.add_flag("--direct", opts.direct_io,
               "write pages with O_DIRECT, bypassing the page cache (longer freeze)");
  app.add_option("--tracker", opts.tracker, tracker_help)->check(CLI::IsMember(tracker_choices()));
  const std::map<std::string, bool> on_off{{"on", true}, {"off", false}};
  app.add_option("--adaptive", opts.tracking.adaptive,
                 "pagemap-scan: leave blocks the program rewrites every interval unprotected "
                 "(on, the default) or protect every written page again (off)")
      ->transform(CLI::CheckedTransformer(on_off));
  app.add_option("--huge-pages", opts.tracking.keep_huge_pages,
                 "pagemap-scan: huge pages stay unprotected unless quiet (keep, the default) or "
                 "are protected like small pages (protect)")
      ->transform(
          CLI::CheckedTransformer(std::map<std::string, bool>{{"keep", true}, {"protect", false}}));
  add_trace_option(app, opts.log, tool);
}

LogFn stderr_log(const std::string& tool, bool trace) {
  return [tool, trace](LogKind kind, const std::string& line) {
    if (kind == LogKind::note || trace)
      std::fprintf(stderr, "%s: %s\n", tool.c_str(), line.c_str());
  };
}

void add_trace_option(CLI::App& app, LogFn& log, const std::string& tool) {
  log = stderr_log(tool, false);
  app.add_flag_callback(
      "--trace", [&log, tool] { log = stderr_log(tool, true); },
      "print the time of each phase on stderr");
}

int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line naming the tool, as every other refusal (README).
    const char* slash = argc > 0 ? std::strrchr(argv[0], '/') : nullptr;
    const char* tool = argc > 0 ? (slash ? slash + 1 : argv[0]) : "cr";
    std::fprintf(stderr, "%s: %s (see --help)\n", tool, e.what());
    return 2;
  }
  return -1;
}

namespace {
pid_t g_child = 0;
void forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}
}  // namespace

int wait_child(pid_t pid) {
  g_child = pid;
  struct sigaction fw {};
  fw.sa_handler = forward;
  for (int s : {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(s, &fw, nullptr);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGQUIT, SIG_IGN);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return 1;
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}

bool is_zombie(pid_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "re");
  if (!f) return false;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] == 'Z';
}

}  // namespace ckpt::cli
