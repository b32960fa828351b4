// restore::place_fds: descriptors put at their numbers from sources at
// other numbers, in generated cases: targets and sources drawn at random
// below a low limit of open files (most numbers taken), sources that sit at
// other entries' targets, one source shared by several entries.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "restore/fd_shuffle.hpp"

using namespace ckpt;

namespace {

// One generated case, run in a child (it changes its descriptor table and
// limit). Returns "" or what went wrong.
std::string run_case(unsigned seed) {
  std::mt19937 rng(seed);
  const int limit = 40 + int(rng() % 200);
  const rlimit rl{rlim_t(limit), rlim_t(limit)};
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return "setrlimit";
  // Files told apart by their size; spread over random free numbers.
  const int files = std::max(1, limit * (50 + int(rng() % 40)) / 100 - 8);
  std::vector<int> numbers(size_t(limit - 3));
  std::iota(numbers.begin(), numbers.end(), 3);
  std::shuffle(numbers.begin(), numbers.end(), rng);
  std::vector<int> where;  // file k's source number
  for (int k = 0; k < files; ++k) {
    int fd = ::memfd_create("shuffle", MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, k + 1) != 0) return "memfd";
    where.push_back(fd);
  }
  // Move each file to a random free number (in a range that is free now).
  for (int k = 0; k < files; ++k) {
    int n = numbers[size_t(k)];
    struct stat st;
    if (::fstat(n, &st) == 0) continue;  // taken (by another file): stays
    if (::dup3(where[size_t(k)], n, O_CLOEXEC) < 0) return "dup3";
    ::close(where[size_t(k)]);
    where[size_t(k)] = n;
  }
  int keep = -1;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return "pipe";
  keep = p[1];
  // Entries: distinct random targets, each from a random file (several from one).
  std::shuffle(numbers.begin(), numbers.end(), rng);
  // At least two numbers below the limit stay free of targets and files:
  // a cycle of moves needs a spare (the original process had its fds and
  // no copies of them).
  const int room = limit - 3 - 1 - 2 - files;  // stdio, the kept fd, spares
  const int entries = std::max(1, std::min(room, files + int(rng() % 6)));
  std::vector<restore::PreparedFile> fds;
  std::vector<int> file_of;
  for (int e = 0; e < entries; ++e) {
    const int k = e < files ? e : int(rng() % unsigned(files));
    fds.push_back({numbers[size_t(e)], where[size_t(k)], int(rng() % 2)});
    file_of.push_back(k);
  }
  std::string err;
  if (!restore::place_fds(fds, &keep, &err)) return "place_fds: " + err;
  for (size_t e = 0; e < fds.size(); ++e) {
    struct stat st;
    const int t = numbers[e];
    if (::fstat(t, &st) != 0 || st.st_size != file_of[e] + 1)
      return "fd " + std::to_string(t) + " holds the wrong file";
    if ((::fcntl(t, F_GETFD) & FD_CLOEXEC) != fds[e].fd_flags)
      return "fd " + std::to_string(t) + ": wrong FD_CLOEXEC";
  }
  for (const auto& f : fds)
    if (f.target == keep) return "the kept fd sits at a target";
  struct stat ks;
  if (::fstat(keep, &ks) != 0 || !S_ISFIFO(ks.st_mode)) return "the kept fd was lost";
  return "";
}

TEST(FdShuffle, GeneratedCasesNearTheLimit) {
  // The child's reason comes back through shared memory: every descriptor
  // a case does not name is closed by the shuffle.
  char* why = static_cast<char*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(why, MAP_FAILED);
  for (unsigned seed = 1; seed <= 1000; ++seed) {
    std::memset(why, 0, 4096);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string r = run_case(seed);
      std::snprintf(why, 4096, "%s", r.c_str());
      ::_exit(r.empty() ? 0 : 1);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "seed " << seed << ": " << (why[0] ? why : "died") << " (status " << st << ")";
  }
  ::munmap(why, 4096);
}

}  // namespace
