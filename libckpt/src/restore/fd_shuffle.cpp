#include "restore/fd_shuffle.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "util/fd.hpp"

namespace ckpt::restore {

namespace {

class FdShuffle {
 public:
  FdShuffle(std::vector<PreparedFile>& fds, std::string* err) : fds_(fds), err_(err) {
    std::vector<int> t;
    for (const PreparedFile& f : fds) t.push_back(f.target);
    std::sort(t.begin(), t.end());
    for (int n : t)  // runs of consecutive targets, to skip them at once
      if (!runs_.empty() && n <= runs_.back().second + 1)
        runs_.back().second = std::max(runs_.back().second, n);
      else
        runs_.push_back({n, n});
  }

  bool run(int* keep_fd);

 private:
  bool allow_targets();
  void close_strays(int keep_fd) const;
  bool is_target(int n) const;
  int past_targets(int n) const;
  int move_to_spare(int fd);
  bool place(size_t i);
  bool fail(const std::string& what) {
    *err_ = what + ": " + std::strerror(errno);
    return false;
  }

  std::vector<PreparedFile>& fds_;
  std::string* err_;
  std::vector<std::pair<int, int>> runs_;     // [first, last] of consecutive targets
  std::map<int, std::vector<size_t>> users_;  // a source's number -> entries not yet placed
  std::vector<bool> placed_, on_the_way_;
};

// Every target number must be open-able: the soft limit of open files is
// raised to the hard one where a target needs it (the saved limits come
// back later, from outside); a target at or above the hard limit fails.
bool FdShuffle::allow_targets() {
  if (runs_.empty()) return true;
  const int top = runs_.back().second;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rlim_t(top) < rl.rlim_cur) return true;
  if (rlim_t(top) >= rl.rlim_max) {
    *err_ = "fd " + std::to_string(top) + " is at or above this restore's limit of open files (" +
            std::to_string(rl.rlim_max) + ", RLIMIT_NOFILE)";
    return false;
  }
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  return true;
}

bool FdShuffle::is_target(int n) const {
  return past_targets(n) != n;
}

// The first number at or after `n` that no target has.
int FdShuffle::past_targets(int n) const {
  auto it = std::upper_bound(runs_.begin(), runs_.end(), std::make_pair(n, INT32_MAX));
  if (it == runs_.begin()) return n;
  --it;
  return n <= it->second ? it->second + 1 : n;
}

// `fd` moved to the lowest free number no target has; -1 on failure.
int FdShuffle::move_to_spare(int fd) {
  for (int from = past_targets(0);;) {
    const int n = ::fcntl(fd, F_DUPFD_CLOEXEC, from);
    if (n < 0) return -1;
    if (!is_target(n)) {
      ::close(fd);
      return n;
    }
    ::close(n);
    from = past_targets(n);
  }
}

// Entry `i` at its target. Where the target holds a source other entries
// still need, those are placed first (their source is closed after the
// last), so a chain of moves needs no spare number; only a cycle (an entry
// on the way here needs it) moves that source to a spare.
bool FdShuffle::place(size_t i) {
  PreparedFile& f = fds_[i];
  if (placed_[i]) return true;
  const int t = f.target;
  if (f.source != t) {
    if (auto there = users_.find(t); there != users_.end()) {
      const std::vector<size_t> waiting = there->second;
      const bool cycle =
          std::any_of(waiting.begin(), waiting.end(), [&](size_t j) { return on_the_way_[j]; });
      on_the_way_[i] = true;
      if (!cycle)
        for (size_t j : waiting)
          if (!place(j)) return false;
      on_the_way_[i] = false;
      if (auto still = users_.find(t); still != users_.end()) {
        const int n = move_to_spare(t);
        if (n < 0) return fail("fd shuffle failed");
        for (size_t j : still->second) fds_[j].source = n;
        users_[n] = std::move(still->second);
        users_.erase(t);
      }
    }
    if (::dup2(f.source, t) < 0) return fail("dup2 to fd " + std::to_string(t));
  }
  const int used = f.source;
  auto& left = users_[used];
  std::erase(left, i);
  if (left.empty()) {
    users_.erase(used);
    if (!is_target(used)) ::close(used);  // a target keeps its file, or gets one later
  }
  f.source = t;
  placed_[i] = true;
  ::fcntl(t, F_SETFD, f.fd_flags);
  return true;
}

// What no entry needs (the restorer's other files, inherited) is closed
// first, as it would be at the end: the numbers are needed now.
void FdShuffle::close_strays(int keep_fd) const {
  std::vector<int> needed = {keep_fd};
  for (const PreparedFile& f : fds_) needed.push_back(f.source >= 0 ? f.source : f.target);
  close_all_except(std::move(needed));
}

bool FdShuffle::run(int* keep_fd) {
  if (!allow_targets()) return false;
  close_strays(*keep_fd);
  for (size_t i = 0; i < fds_.size(); ++i)
    if (fds_[i].source >= 0) users_[fds_[i].source].push_back(i);
  if (is_target(*keep_fd) || users_.count(*keep_fd)) {
    const int n = move_to_spare(*keep_fd);
    if (n < 0) return fail("fd shuffle failed");
    *keep_fd = n;
  }
  placed_.assign(fds_.size(), false);
  on_the_way_.assign(fds_.size(), false);
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (fds_[i].source < 0) {
      ::fcntl(fds_[i].target, F_SETFD, fds_[i].fd_flags);
      placed_[i] = true;
      continue;
    }
    if (!place(i)) return false;
  }
  return true;
}

}  // namespace

bool place_fds(std::vector<PreparedFile>& fds, int* keep_fd, std::string* err) {
  return FdShuffle(fds, err).run(keep_fd);
}

}  // namespace ckpt::restore
