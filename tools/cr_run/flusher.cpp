#include "cr_run/flusher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include "image/store.hpp"
#include "util/clock.hpp"
#include "util/fd.hpp"

namespace cr_run {

namespace fs = std::filesystem;

namespace {

using ckpt::now_seconds;

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// One file, at most `rate` bytes per second over the whole generation
// (`t0`, `*done`: when the generation's copy began, what it has copied).
std::string copy_file(const std::string& from, const std::string& to, double rate, double t0,
                      uint64_t* done) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return errno_text("reading " + from);
  struct stat st;
  if (::fstat(in, &st) != 0) {
    ::close(in);
    return errno_text(from);
  }
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 07777);
  if (out < 0) {
    ::close(in);
    return errno_text("creating " + to);
  }
  std::vector<char> buf(1 << 20);
  std::string err;
  for (;;) {
    ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno_text("reading " + from);
      break;
    }
    if (n == 0) break;
    if (auto w = ckpt::write_all(out, buf.data(), size_t(n), to); !w.ok()) {
      err = w.error().message;
      break;
    }
    *done += uint64_t(n);
    if (rate > 0) {  // ahead of the rate: wait until it catches up
      const double due = t0 + double(*done) / rate - now_seconds();
      if (due > 0) ::usleep(useconds_t(due * 1e6));
    }
  }
  if (err.empty() && ::fsync(out) != 0) err = errno_text("syncing " + to);
  ::close(in);
  if (::close(out) != 0 && err.empty()) err = errno_text("closing " + to);
  return err;
}

std::string copy_tree(const fs::path& from, const fs::path& to, double rate, double t0,
                      uint64_t* done) {
  if (::mkdir(to.c_str(), 0700) != 0) return errno_text("creating " + to.string());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(from, ec)) {
    const fs::path target = to / e.path().filename();
    std::string err = e.is_directory() ? copy_tree(e.path(), target, rate, t0, done)
                                       : copy_file(e.path(), target, rate, t0, done);
    if (!err.empty()) return err;
  }
  if (ec) return "listing " + from.string() + ": " + ec.message();
  if (auto st = ckpt::image::fsync_dir(to); !st.ok()) return st.error().message;
  return "";
}

// The exact bytes of a short report through the pipe (one write).
void report(int fd, const std::string& text) {
  const size_t n = std::min(text.size(), size_t(4000));
  if (::write(fd, text.data(), n) < 0) return;
}

}  // namespace

std::string copy_generation(const std::string& from, const std::string& chain_dir, double rate,
                            uint64_t* bytes) {
  *bytes = 0;
  const std::string name = fs::path(from).filename().string();
  const std::string final_path = chain_dir + "/" + name;
  const std::string hidden = chain_dir + "/.flushing-" + name;
  std::error_code ec;
  fs::create_directories(chain_dir, ec);
  if (ec) return "creating " + chain_dir + ": " + ec.message();
  if (fs::exists(final_path, ec)) return "";  // there already (a copy that was done before)
  fs::remove_all(hidden, ec);                 // a copy interrupted before
  std::string err = copy_tree(from, hidden, rate, now_seconds(), bytes);
  if (err.empty() && ::rename(hidden.c_str(), final_path.c_str()) != 0)
    err = errno_text("renaming " + hidden);
  if (err.empty())
    if (auto st = ckpt::image::fsync_dir(chain_dir); !st.ok()) err = st.error().message;
  if (!err.empty()) fs::remove_all(hidden, ec);
  return err;
}

Flusher::~Flusher() {
  cancel();
}

void Flusher::cancel() {
  if (child_ > 0) {
    ::kill(child_, SIGKILL);
    ::waitpid(child_, nullptr, 0);
    child_ = 0;
  }
  if (report_fd_ >= 0) ::close(report_fd_);
  report_fd_ = -1;
  pending_.clear();
}

void Flusher::committed(Point p) {
  // A new chain supersedes the older chains' generations still waiting,
  // and a failure of theirs does not delay it.
  if (p.generation == 1 && !pending_.empty() && pending_.front().chain < p.chain) {
    while (!pending_.empty() && pending_.front().chain < p.chain) pending_.pop_front();
    retry_at_ = 0;
  }
  pending_.push_back(p);
  pump();
}

double Flusher::retry_in() const {
  if (child_ > 0 || pending_.empty() || retry_at_ == 0) return -1;
  return std::max(0.0, retry_at_ - now_seconds());
}

void Flusher::pump() {
  if (child_ > 0 || pending_.empty()) return;
  if (retry_at_ > 0 && now_seconds() < retry_at_) return;
  retry_at_ = 0;
  start(pending_.front());
}

void Flusher::start(Point p) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    retry_at_ = now_seconds() + 5;
    return;
  }
  const std::string from = chain_dir(local_, p.chain);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    retry_at_ = now_seconds() + 5;
    return;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(fds[0]);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    uint64_t bytes = 0;
    std::string err = target_.copy(from, p, &bytes);
    report(fds[1], err.empty() ? "ok " + std::to_string(bytes) : err);
    ::_exit(err.empty() ? 0 : 1);
  }
  ::close(fds[1]);
  child_ = pid;
  report_fd_ = fds[0];
  copying_ = p;
  started_ = now_seconds();
}

bool Flusher::reaped(pid_t pid, int status) {
  if (pid != child_ || child_ <= 0) return false;
  child_ = 0;
  char buf[4096];
  ssize_t n = ::read(report_fd_, buf, sizeof buf);
  ::close(report_fd_);
  report_fd_ = -1;
  std::string text = n > 0 ? std::string(buf, size_t(n)) : "the copy ended without a report";
  const std::string what = "chain " + std::to_string(copying_.chain) + " generation " +
                           std::to_string(copying_.generation);
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && text.rfind("ok ", 0) == 0;
  const bool superseded = pending_.empty() || pending_.front().chain != copying_.chain ||
                          pending_.front().generation != copying_.generation;
  if (!ok && superseded) {  // a newer chain came meanwhile (and may have pruned this one)
    pump();
    return true;
  }
  if (!ok) {
    // Tried again in 5 s (a later generation of the same chain cannot go
    // before it); a newer chain supersedes it.
    retry_at_ = now_seconds() + 5;
    log_.event(
        "flush_failed",
        "copying " + what + " to the " + target_.name + " level failed: " + text + " (tried again)",
        {{"level", target_.name},
         {"chain", copying_.chain},
         {"generation", copying_.generation},
         {"message", text}});
    pump();
    return true;
  }
  if (!superseded) pending_.pop_front();
  const uint64_t bytes = std::strtoull(text.c_str() + 3, nullptr, 10);
  const double seconds = now_seconds() - started_;
  char line[200];
  std::snprintf(line, sizeof line, "flushed %s to the %s level: %.1f MiB in %.3f s", what.c_str(),
                target_.name.c_str(), double(bytes) / (1 << 20), seconds);
  log_.event("flush", line,
             {{"level", target_.name},
              {"chain", copying_.chain},
              {"generation", copying_.generation},
              {"bytes", bytes},
              {"seconds", seconds}});
  if (target_.copied) target_.copied(seconds);
  if (copying_.generation == 1 && target_.after_full) target_.after_full();
  pump();
  return true;
}

void Flusher::drain() {
  retry_at_ = 0;
  while (child_ > 0 || !pending_.empty()) {
    if (child_ <= 0) {
      pump();
      if (child_ <= 0) return;  // cannot start a copy: the rest stays local
    }
    int st = 0;
    const pid_t w = ::waitpid(child_, &st, 0);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      child_ = 0;
      return;
    }
    const Point was = copying_;
    reaped(w, st);
    // A copy that failed is not tried again and again here.
    if (!pending_.empty() && pending_.front().chain == was.chain &&
        pending_.front().generation == was.generation)
      return;
  }
}

}  // namespace cr_run
