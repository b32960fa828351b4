// Migration of a SIZE MiB process (default 1024) that keeps writing at
// several rates, frozen vs live, between two network namespaces joined by a
// veth pair (created here, removed at exit), with the TCP throughput between
// the same namespaces measured in the same run:
//   downtime, total time, bytes sent (vs populated memory), rounds, and the
//   frozen stream's throughput vs raw TCP.
//
//   bench_migrate [--size MiB] [--rates 0,8,32,128] [--bin DIR] [--reps N] [--trace]
// Needs root. The tools are taken from --bin (default: next to this binary).
// Memory condition: "warm" (3 GiB touched and freed just before each
// migration, see docs/performance.md).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "incompressible.hpp"
#include "usage.hpp"
#include "util/clock.hpp"

using ckpt::now_seconds;

namespace {

std::string g_ns_a, g_ns_b, g_addr_a, g_addr_b, g_work;
bool g_trace = false;  // --trace: cr_recv's build phases after each migration

int sh(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
}

void cleanup() {
  if (!g_ns_a.empty()) sh("ip netns del " + g_ns_a + " 2>/dev/null");
  if (!g_ns_b.empty()) sh("ip netns del " + g_ns_b + " 2>/dev/null");
  if (!g_work.empty()) sh("rm -rf " + g_work);
}

void die(const std::string& m) {
  std::fprintf(stderr, "bench_migrate: %s\n", m.c_str());
  cleanup();
  std::exit(1);
}

void setup_net() {
  const std::string tag = std::to_string(getpid());
  g_ns_a = "bmA" + tag;
  g_ns_b = "bmB" + tag;
  g_addr_a = "10.252.0.1";
  g_addr_b = "10.252.0.2";
  std::string va = "bvA" + tag, vb = "bvB" + tag;
  std::string cmd =
      "ip netns add " + g_ns_a + " && ip netns add " + g_ns_b + " && ip link add " + va +
      " type veth peer name " + vb + " && ip link set " + va + " netns " + g_ns_a +
      " && ip link set " + vb + " netns " + g_ns_b + " && ip -n " + g_ns_a + " addr add " +
      g_addr_a + "/24 dev " + va + " && ip -n " + g_ns_b + " addr add " + g_addr_b + "/24 dev " +
      vb + " && ip -n " + g_ns_a + " link set " + va + " up && ip -n " + g_ns_b + " link set " +
      vb + " up && ip -n " + g_ns_a + " link set lo up && ip -n " + g_ns_b + " link set lo up";
  if (sh(cmd) != 0) die("cannot create the network namespaces (root? iproute2?)");
}

void enter_ns(const std::string& ns) {
  int fd = open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(3);
  close(fd);
}

// Raw TCP from A to B: one connection, 8 MiB writes of `bytes`; the receiver
// times from accept to EOF. Returns GB/s. Hot: both ends reuse one 8 MiB
// buffer (the link's best case). Otherwise the sender sends `bytes` of
// populated memory and the receiver lands them in fresh anonymous memory,
// as any migration must (a destination process's memory is new there).
double tcp_throughput(uint64_t bytes, int port, bool hot) {
  int p[2];
  if (pipe(p) != 0) die("pipe");
  pid_t rx = fork();
  if (rx == 0) {
    enter_ns(g_ns_b);
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, g_addr_b.c_str(), &a.sin_addr);
    if (bind(l, (sockaddr*)&a, sizeof a) != 0 || listen(l, 1) != 0) _exit(4);
    (void)!write(p[1], "L", 1);
    int c = accept(l, nullptr, nullptr);
    double t0 = now_seconds();
    std::vector<char> buf(8 << 20);
    char* fresh = hot ? nullptr
                      : static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (fresh == MAP_FAILED) _exit(7);
    uint64_t got = 0;
    for (;;) {
      const bool into_buf = hot || got >= bytes;
      char* at = into_buf ? buf.data() : fresh + got;
      size_t room = into_buf ? buf.size() : std::min<uint64_t>(buf.size(), bytes - got);
      ssize_t n = recv(c, at, room, 0);
      if (n <= 0) break;
      got += uint64_t(n);
    }
    double gbs = double(got) / (now_seconds() - t0) / 1e9;
    (void)!write(p[1], &gbs, sizeof gbs);
    _exit(0);
  }
  char l;
  if (read(p[0], &l, 1) != 1) die("tcp receiver failed");
  pid_t tx = fork();
  if (tx == 0) {
    enter_ns(g_ns_a);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    inet_pton(AF_INET, g_addr_b.c_str(), &a.sin_addr);
    std::vector<char> buf(8 << 20, 'x');
    char* src = hot ? nullptr
                    : static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
    if (src == MAP_FAILED) _exit(7);
    if (src) memset(src, 'y', bytes);  // before connecting: the receiver's clock runs from accept
    if (connect(s, (sockaddr*)&a, sizeof a) != 0) _exit(5);
    for (uint64_t sent = 0; sent < bytes;) {
      const char* from = hot ? buf.data() : src + sent;
      ssize_t n = send(s, from, std::min<uint64_t>(buf.size(), bytes - sent), 0);
      if (n <= 0) _exit(6);
      sent += uint64_t(n);
    }
    close(s);
    _exit(0);
  }
  double gbs = 0;
  if (read(p[0], &gbs, sizeof gbs) != sizeof gbs) die("tcp measurement failed");
  waitpid(tx, nullptr, 0);
  waitpid(rx, nullptr, 0);
  close(p[0]);
  close(p[1]);
  return gbs;
}

// The workload: SIZE bytes of incompressible data, then one word written
// into `rate` MB/s worth of random pages, in 1 ms slices, until killed.
pid_t start_workload(size_t bytes, double rate_mbs, const std::string& ready) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  int nul = open("/dev/null", O_RDWR);
  dup2(nul, 0);
  dup2(nul, 1);
  dup2(nul, 2);
  syscall(SYS_close_range, 3u, ~0u, 0u);
  uint64_t* m = bench::map_incompressible(bytes);
  if (!m) _exit(1);
  uint64_t x = m[bytes / 8 - 1];  // the generator goes on from the fill's last word
  int fd = open(ready.c_str(), O_WRONLY | O_CREAT, 0600);
  close(fd);
  const size_t pages = bytes / 4096;
  const double per_ms = rate_mbs * 1e6 / 4096 / 1000;
  double owed = 0;
  for (;;) {
    owed += per_ms;
    for (; owed >= 1; owed -= 1) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      m[(x % pages) * 512] += 1;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, nullptr);
  }
}

void wait_for(const std::string& path, double timeout) {
  double t0 = now_seconds();
  struct stat st;
  while (stat(path.c_str(), &st) != 0) {
    if (now_seconds() - t0 > timeout) die("timed out waiting for " + path);
    usleep(20000);
  }
}

void warm_memory() {
  const size_t n = 3ull << 30;
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
    for (size_t i = 0; i < n; i += 4096) static_cast<char*>(p)[i] = 1;
    munmap(p, n);
  }
}

std::string read_all(const std::string& path) {
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return {};
  std::string s;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  fclose(f);
  return s;
}

// A VM that reports free memory to its host (virtio-balloon free page
// reporting) gets freed blocks of 2^order pages back slowly once reported
// (about 2 s after they were freed): the warm-up above helps only so long,
// and downtimes swing with it (docs/performance.md, "Free page reporting").
void print_memory_condition() {
  std::string order = read_all("/sys/module/page_reporting/parameters/page_reporting_order");
  if (order.empty()) return;
  const int o = std::atoi(order.c_str());
  if (o > 10)
    std::printf("free page reporting: off (order %d)\n", o);
  else
    std::printf(
        "free page reporting: on (blocks of %d KiB), so fresh memory may come slowly "
        "from the host; see docs/performance.md\n",
        4 << o);
}

struct Result {
  std::string mode;
  double rate = 0;
  nlohmann::json mig;
  bool ok = false;
  std::string error;
};

Result migrate_once(const std::string& bin, size_t bytes, double rate, bool live, int port) {
  Result r;
  r.mode = live ? "live" : "frozen";
  r.rate = rate;
  const std::string tag = r.mode + "-" + std::to_string(int(rate)) + "-" + std::to_string(port);
  const std::string ready = g_work + "/ready-" + tag;
  const std::string recv_out = g_work + "/recv-" + tag + ".out";
  const std::string recv_err = g_work + "/recv-" + tag + ".err";
  pid_t recv = fork();
  if (recv == 0) {
    int o = open(recv_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(recv_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int nul = open("/dev/null", O_RDONLY);
    dup2(nul, 0);
    dup2(o, 1);
    dup2(e, 2);
    syscall(SYS_close_range, 3u, ~0u, 0u);
    std::string listen = g_addr_b + ":" + std::to_string(port);
    std::string cr_recv = bin + "/cr_recv", token = g_work + "/token";
    execlp("ip", "ip", "netns", "exec", g_ns_b.c_str(), "unshare", "--pid", "--fork",
           "--mount-proc", "--kill-child", cr_recv.c_str(), "--listen", listen.c_str(), "--token",
           token.c_str(), "--once", "--json", g_trace ? "--trace" : (char*)nullptr, (char*)nullptr);
    _exit(127);
  }
  // Wait until it listens.
  for (int i = 0;; ++i) {
    std::string q = "ip netns exec " + g_ns_b + " ss -Hltn 'sport = :" + std::to_string(port) +
                    "' | grep -q LISTEN";
    if (sh(q) == 0) break;
    if (i > 100) die("cr_recv does not listen: " + read_all(recv_err));
    usleep(50000);
  }
  pid_t w = start_workload(bytes, rate, ready);
  wait_for(ready, 60);
  usleep(300000);  // the write rate settles
  warm_memory();
  std::string cmd = "ip netns exec " + g_ns_a + " " + bin + "/cr_migrate --to " + g_addr_b + ":" +
                    std::to_string(port) + " --token " + g_work + "/token " +
                    (live ? "--live" : "--frozen") + " --json " + std::to_string(w) + " 2>" +
                    g_work + "/mig.err";
  FILE* f = popen(cmd.c_str(), "r");
  std::string out;
  char buf[8192];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  int rc = pclose(f);
  if (rc == 0 && !out.empty()) {
    r.mig = nlohmann::json::parse(out, nullptr, false);
    r.ok = !r.mig.is_discarded();
  } else {
    r.error = read_all(g_work + "/mig.err");
  }
  if (g_trace) std::fprintf(stderr, "%s", read_all(recv_err).c_str());
  kill(recv, SIGKILL);  // unshare --kill-child takes cr_recv and the migrated workload along
  waitpid(recv, nullptr, 0);
  kill(w, SIGKILL);  // still here if the migration failed
  waitpid(w, nullptr, 0);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  std::vector<double> rates = {0, 8, 32, 128};
  int reps = 1;
  std::string bin;
  {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = 0;
      bin = std::string(self).substr(0, std::string(self).rfind('/'));
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--size" && i + 1 < argc) {
      mib = std::stoul(argv[++i]);
    } else if (a == "--rates" && i + 1 < argc) {
      rates.clear();
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) rates.push_back(std::stod(t));
    } else if (a == "--bin" && i + 1 < argc) {
      bin = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
    } else if (a == "--trace") {
      g_trace = true;
    } else {
      return usage_exit(
          "bench_migrate", a,
          "usage: bench_migrate [--size MiB] [--rates 0,8,32] [--bin DIR] [--reps N] [--trace]\n"
          "Frozen and live migration of a process holding MiB (default 1024) between\n"
          "two network namespaces, writing at each rate (MB/s), against a TCP copy\n"
          "of the same bytes; medians of N runs (--trace: how cr_recv built each).\n"
          "Needs root.\n");
    }
  }
  if (geteuid() != 0) die("needs root (network namespaces)");
  char tmpl[] = "/tmp/bench-migrate-XXXXXX";
  if (!mkdtemp(tmpl)) die("mkdtemp");
  g_work = tmpl;
  signal(SIGINT, [](int) {
    cleanup();
    _exit(130);
  });
  signal(SIGTERM, [](int) {
    cleanup();
    _exit(143);
  });
  setup_net();
  sh("head -c 32 /dev/urandom > " + g_work + "/token && chmod 600 " + g_work + "/token");
  const size_t bytes = mib << 20;

  double tcp = 0, tcp_fresh = 0;
  for (int i = 0; i < 3; ++i) tcp = std::max(tcp, tcp_throughput(2ull << 30, 29000 + i, true));
  for (int i = 0; i < 3; ++i)
    tcp_fresh = std::max(tcp_fresh, tcp_throughput(bytes, 29100 + i, false));
  print_memory_condition();
  std::printf("TCP A->B (one connection, 8 MiB writes, best of 3): %.2f GB/s\n", tcp);
  std::printf("TCP A->B, %zu MiB of memory into fresh memory (best of 3): %.2f GB/s\n\n", mib,
              tcp_fresh);
  std::printf("%-6s %8s %6s %9s %9s %9s %10s %8s %8s %8s  %s\n", "mode", "MB/s", "rounds",
              "downtime", "total s", "GB sent", "sent/pop", "GB/s", "vs TCP", "vs fresh", "stop");
  nlohmann::json all = nlohmann::json::array();
  int port = 30000;
  for (int rep = 0; rep < reps; ++rep)
    for (double rate : rates)
      for (bool live : {false, true}) {
        Result r = migrate_once(bin, bytes, rate, live, port++);
        if (!r.ok) {
          std::printf("%-6s %8.0f  FAILED: %s\n", r.mode.c_str(), rate, r.error.c_str());
          continue;
        }
        const auto& m = r.mig;
        double sent = m["bytes_total"].get<double>();
        // The stream rate of the full round: everything populated, read and sent.
        const auto& r1 = m["round_details"][0];
        double gbs = r1["bytes"].get<double>() / r1["send_seconds"].get<double>() / 1e9;
        std::printf("%-6s %8.0f %6d %8.1fms %9.2f %9.3f %10.2f %8.2f %8.2f %8.2f  %s\n",
                    r.mode.c_str(), rate, m["rounds"].get<int>(),
                    m["downtime_seconds"].get<double>() * 1e3, m["migration_seconds"].get<double>(),
                    sent / 1e9, sent / double(bytes), gbs, gbs / tcp, gbs / tcp_fresh,
                    m["stop_reason"].get<std::string>().c_str());
        std::fflush(stdout);
        nlohmann::json j = m;
        j["write_rate_mbs"] = rate;
        j["populated_bytes"] = bytes;
        j["tcp_gbs"] = tcp;
        j["tcp_fresh_gbs"] = tcp_fresh;
        j["round1_gbs"] = gbs;
        all.push_back(j);
      }
  std::printf("\n%s\n", all.dump().c_str());
  cleanup();
  return 0;
}
