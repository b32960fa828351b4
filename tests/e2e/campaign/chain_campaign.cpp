// chain_campaign BIN_DIR PRISTINE WORK SEED COUNT: applies COUNT random
// mutations, one at a time, to copies of the checkpoint chain in PRISTINE
// (chain_phases: a full and two incrementals) and checks each result.
//
// Mutations: bit flips, byte changes, truncation, appended garbage, deletion
// of a file or of a whole generation directory, and files or whole
// directories swapped between generations (sometimes two at once). For each,
// `cr_info --verify` must pass or refuse cleanly (exit 1, one line, no
// signal); where it passes (and for every 8th refused one), `cr_restart`
// (stdin "q") must either refuse cleanly or restore
// the state of the newest generation left: the restored chain_phases checks
// every byte of its memory itself and prints its phase, which must be the
// newest remaining generation's. A verify that passes where the restore
// refuses is an overclaim. Everything else (a wrong phase, a failed
// self-check, a crash, a hang) is wrong. Seeded: mutation i depends only on
// SEED and i. Prints the counts; exit 0 only when nothing was wrong.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char* const kFiles[] = {"pages.img", "addr.img", "meta.img"};
pid_t g_orig_pid = 0;  // the checkpointed PID: a restored process has it

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const std::string& p, const std::string& data) {
  ::unlink(p.c_str());  // never write through a hard link into PRISTINE
  std::ofstream f(p, std::ios::binary);
  f << data;
}

void die(const std::string& why) {
  std::fprintf(stderr, "chain_campaign: %s\n", why.c_str());
  std::exit(2);
}

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void rm_rf(const std::string& p) {
  struct stat st;
  if (::lstat(p.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    for (const std::string& n : list(p)) rm_rf(p + "/" + n);
    ::rmdir(p.c_str());
  } else {
    ::unlink(p.c_str());
  }
}

// Hard-links every file of the chain (a mutated file is rewritten, not edited).
void copy_chain(const std::string& from, const std::string& to) {
  if (::mkdir(to.c_str(), 0700) != 0) die("mkdir " + to + ": " + std::strerror(errno));
  for (const std::string& g : list(from)) {
    if (::mkdir((to + "/" + g).c_str(), 0700) != 0)
      die("mkdir: " + std::string(std::strerror(errno)));
    for (const std::string& f : list(from + "/" + g))
      if (::link((from + "/" + g + "/" + f).c_str(), (to + "/" + g + "/" + f).c_str()) != 0)
        die("link: " + std::string(std::strerror(errno)));
  }
}

struct Run {
  int status = 0;  // wait status
  std::string out, err;
  bool timed_out = false;
};

// Runs argv with stdin and stdout on pipes (what chain_phases had at its
// checkpoint: a restored process checks that its fds are of the same kinds):
// stdin holds `stdin_text`, stdout goes through `cat` into TMP.out.
Run run(const std::vector<std::string>& argv, const std::string& stdin_text, const std::string& tmp,
        int timeout_s) {
  int in[2], out[2];
  if (::pipe(in) != 0 || ::pipe(out) != 0) die("pipe");
  if (::write(in[1], stdin_text.data(), stdin_text.size()) != ssize_t(stdin_text.size()))
    die("write");
  ::close(in[1]);
  pid_t cat = ::fork();
  if (cat == 0) {
    int f = ::open((tmp + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out[0], 0);
    ::dup2(f, 1);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    ::execl("/bin/cat", "cat", (char*)nullptr);
    ::_exit(127);
  }
  pid_t c = ::fork();
  if (c == 0) {
    int err = ::open((tmp + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err, 2);
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    std::vector<char*> a;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[0]);
  ::close(out[1]);
  Run r;
  for (int waited_ms = 0;; waited_ms += 5) {
    pid_t w = ::waitpid(c, &r.status, WNOHANG);
    if (w == c) break;
    if (waited_ms > timeout_s * 1000) {
      r.timed_out = true;
      ::kill(c, SIGKILL);
      ::waitpid(c, &r.status, 0);
      break;
    }
    ::usleep(5000);
  }
  if (r.timed_out) {  // a hung restored process (it has the original's PID)
    if (g_orig_pid > 0) ::kill(g_orig_pid, SIGKILL);
    ::kill(cat, SIGKILL);
  }
  int st;
  ::waitpid(cat, &st, 0);
  r.out = slurp(tmp + ".out");
  r.err = slurp(tmp + ".err");
  return r;
}

bool one_line_from(const Run& r, const std::string& tool) {
  return WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0 && r.err.rfind(tool + ": ", 0) == 0 &&
         std::count(r.err.begin(), r.err.end(), '\n') == 1 && r.err.back() == '\n';
}

struct Mutator {
  std::mt19937_64 rng;
  std::string dir;
  std::vector<std::string> gens;  // gen-* names in PRISTINE order
  uint64_t pick(uint64_t n) { return rng() % n; }
  std::string any_gen() { return gens[pick(gens.size())]; }
  std::string any_file() { return kFiles[pick(3)]; }

  // A position biased towards the headers and records (where one flipped
  // bit matters most), else anywhere.
  size_t position(const std::string& data) {
    if (data.empty()) return 0;
    if (pick(2) == 0) return pick(std::min<size_t>(data.size(), 256));
    return pick(data.size());
  }

  std::string apply() {
    const std::string g = any_gen(), f = any_file(), path = dir + "/" + g + "/" + f;
    const std::string what = g + "/" + f;
    switch (pick(10)) {
      case 0:
      case 1:
      case 2: {  // bit flip
        std::string d = slurp(path);
        if (d.empty()) return "nothing";
        size_t at = position(d);
        int bit = int(pick(8));
        d[at] = char(uint8_t(d[at]) ^ (1u << bit));
        spit(path, d);
        return "flip bit " + std::to_string(bit) + " of byte " + std::to_string(at) + " of " + what;
      }
      case 3: {  // byte change
        std::string d = slurp(path);
        if (d.empty()) return "nothing";
        size_t at = position(d);
        uint8_t v = uint8_t(1 + pick(255));
        d[at] = char(uint8_t(d[at]) ^ v);
        spit(path, d);
        return "change byte " + std::to_string(at) + " of " + what;
      }
      case 4: {  // truncation
        std::string d = slurp(path);
        size_t to =
            pick(2) ? pick(d.size() + 1) : d.size() - std::min<size_t>(d.size(), 1 + pick(16));
        d.resize(to);
        spit(path, d);
        return "truncate " + what + " to " + std::to_string(to);
      }
      case 5: {  // appended garbage
        std::string d = slurp(path);
        size_t n = pick(2) ? 1 + pick(16) : 1 + pick(8192);
        for (size_t i = 0; i < n; ++i) d.push_back(char(pick(256)));
        spit(path, d);
        return "append " + std::to_string(n) + " bytes to " + what;
      }
      case 6:  // deletion
        if (pick(3) == 0) {
          rm_rf(dir + "/" + g);
          return "delete " + g;
        }
        ::unlink(path.c_str());
        return "delete " + what;
      case 7:
      case 8: {  // a file swapped between two generations
        std::string h = any_gen();
        while (h == g) h = any_gen();
        const std::string other = dir + "/" + h + "/" + f, tmp = dir + "/swap";
        ::rename(path.c_str(), tmp.c_str());
        ::rename(other.c_str(), path.c_str());
        ::rename(tmp.c_str(), other.c_str());
        return "swap " + f + " of " + g + " and " + h;
      }
      default: {  // whole directories swapped
        std::string h = any_gen();
        while (h == g) h = any_gen();
        const std::string a = dir + "/" + g, b = dir + "/" + h, tmp = dir + "/swap";
        ::rename(a.c_str(), tmp.c_str());
        ::rename(b.c_str(), a.c_str());
        ::rename(tmp.c_str(), b.c_str());
        return "swap directories " + g + " and " + h;
      }
    }
  }
};

// The newest generation directory left (what a restore takes), 0 for none.
long newest_gen(const std::string& dir) {
  long best = 0;
  for (const std::string& n : list(dir))
    if (n.rfind("gen-", 0) == 0) best = std::max(best, std::atol(n.c_str() + 4));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) die("usage: chain_campaign BIN_DIR PRISTINE WORK SEED COUNT");
  const std::string bin = argv[1], pristine = argv[2], work = argv[3];
  const uint64_t seed = std::strtoull(argv[4], nullptr, 10);
  const long count = std::atol(argv[5]);
  const std::string ready = slurp(pristine + "/../ready");
  const pid_t orig_pid = pid_t(std::atoi(ready.c_str()));
  g_orig_pid = orig_pid;
  Mutator m;
  m.gens = list(pristine);
  if (m.gens.size() != 3 || orig_pid <= 0) die("PRISTINE must hold 3 generations and ../ready");

  long verify_refused = 0, refused = 0, correct = 0, wrong = 0, restores = 0;
  for (long i = 0; i < count; ++i) {
    m.rng.seed(seed * 1000003 + uint64_t(i));
    const std::string dir = work + "/m";
    rm_rf(dir);
    copy_chain(pristine, dir);
    m.dir = dir;
    std::string what = m.apply();
    if (m.pick(20) == 0) what += " + " + m.apply();  // sometimes two at once
    const long expect_phase = newest_gen(dir) - 1;

    Run v = run({bin + "/cr_info", "--dir", dir, "--verify"}, "", work + "/v", 60);
    std::string bad;
    const bool v_ok = WIFEXITED(v.status) && WEXITSTATUS(v.status) == 0;
    if (WIFSIGNALED(v.status) || v.timed_out)
      bad = "cr_info crashed or hung";
    else if (!v_ok && !one_line_from(v, "cr_info"))
      bad = "cr_info failed without a one-line error: " + v.err;
    // A restore wherever verify passed, and of every 8th refused mutation
    // too (restore checks only what it reads: it refuses or restores right).
    if (bad.empty() && (v_ok || i % 8 == 0)) {
      ++restores;
      Run r = run({bin + "/cr_restart", "--dir", dir}, "q\n", work + "/r", 30);
      const std::string want = "final phase " + std::to_string(expect_phase) + "\ndone " + ready;
      const bool r_ok = WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
      if (r.timed_out || WIFSIGNALED(r.status)) {
        bad = "cr_restart crashed or hung";
      } else if (r_ok && r.out == want) {
        ++correct;
      } else if (r_ok) {
        bad = "restored a wrong state: " + r.out.substr(0, r.out.find('\n'));
      } else if (one_line_from(r, "cr_restart") && r.out.empty()) {
        ++refused;
        if (v_ok) bad = "cr_info --verify passed but the restore refused: " + r.err;
      } else {
        bad = "restore failed (exit " + std::to_string(WEXITSTATUS(r.status)) + "): " + r.err;
      }
    } else if (bad.empty()) {
      ++refused;  // verify refused it: so would a restore that read everything
    }
    if (!v_ok) ++verify_refused;
    if (!bad.empty()) {
      ++wrong;
      if (!bad.empty() && bad.back() == '\n') bad.pop_back();
      std::printf("WRONG %ld (%s): %s\n", i, what.c_str(), bad.c_str());
    }
  }
  rm_rf(work + "/m");
  std::printf(
      "mutations %ld (seed %llu): refused %ld, correct %ld, wrong %ld (cr_info --verify refused "
      "%ld; restores run %ld)\n",
      count, (unsigned long long)seed, refused, correct, wrong, verify_refused, restores);
  return wrong == 0 ? 0 : 1;
}
