// A child process with kPages populated pages that writes ('w') or drops
// ('d') page N on command and answers one byte when done: the target of the
// tracker tests that need a real second process (soft-dirty, kmod).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <vector>

#include "image/format.hpp"
#include "mem/range.hpp"

namespace ckpt::testing {

constexpr uint64_t kChildPage = image::kPageSize;
constexpr int kChildPages = 64;

struct PageChild {
  pid_t pid = 0;
  int cmd = -1, ack = -1;
  uint64_t base = 0;

  // `traced`: this process becomes the child's ptrace tracer, as a
  // checkpointer is (the kmod's permission rule).
  void start(bool traced) {
    constexpr uint64_t P = kChildPage;
    int c[2], a[2], b[2];
    ASSERT_EQ(::pipe(c), 0);
    ASSERT_EQ(::pipe(a), 0);
    ASSERT_EQ(::pipe(b), 0);
    pid = ::fork();
    if (pid == 0) {
      // Only the three pipes stay open: a descriptor inherited from whatever
      // started the tests (CI's shell holds pipes of its own) would tie the
      // child to a process outside its job, and a checkpoint refuses that.
      std::set<int> keep{c[0], a[1], b[1]};
      int from = 3;
      for (int fd : keep) {
        if (fd > from) ::close_range(unsigned(from), unsigned(fd - 1), 0);
        from = fd + 1;
      }
      ::close_range(unsigned(from), ~0u, 0);
      auto* mem = static_cast<char*>(::mmap(nullptr, kChildPages * P, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      ::madvise(mem, kChildPages * P, MADV_NOHUGEPAGE);
      for (int i = 0; i < kChildPages; ++i) mem[i * P] = 1;
      // Fresh pages sit in a per-CPU LRU batch for a while (a reference the
      // module counts as a possible writer): push them out with more.
      auto* filler = static_cast<char*>(
          ::mmap(nullptr, 64 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      for (int i = 0; i < 64; ++i) filler[i * P] = 1;
      uint64_t addr = reinterpret_cast<uint64_t>(mem);
      (void)!::write(b[1], &addr, sizeof addr);
      char op[2];
      while (::read(c[0], op, 2) == 2) {
        if (op[0] == 'w') mem[op[1] * P + 7] = 42;
        if (op[0] == 'd') ::madvise(mem + op[1] * P, P, MADV_DONTNEED);
        (void)!::write(a[1], "k", 1);
      }
      ::_exit(0);
    }
    cmd = c[1];
    ack = a[0];
    ASSERT_EQ(::read(b[0], &base, sizeof base), ssize_t(sizeof base));
    if (traced) {
      ASSERT_EQ(::ptrace(PTRACE_SEIZE, pid, nullptr, nullptr), 0);
    }
  }
  void op(char what, int page) {
    char o[2] = {what, char(page)};
    ASSERT_EQ(::write(cmd, o, 2), 2);
    char k;
    ASSERT_EQ(::read(ack, &k, 1), 1);
  }
  ~PageChild() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, __WALL);
    }
  }
};

// Page numbers (in the child's block) that `ranges` cover.
inline std::set<int> pages_of(const std::vector<mem::Range>& ranges, uint64_t base) {
  std::set<int> out;
  for (const auto& r : ranges)
    for (uint64_t a = r.addr; a < r.end(); a += kChildPage)
      if (a >= base && a < base + kChildPages * kChildPage)
        out.insert(int((a - base) / kChildPage));
  return out;
}

}  // namespace ckpt::testing
