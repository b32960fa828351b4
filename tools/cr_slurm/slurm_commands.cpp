#include "cr_slurm/slurm_commands.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "cr_slurm/task.hpp"

namespace cr_slurm {

namespace {

// Runs argv with the signals the supervisor blocks unblocked in the child;
// returns its standard output, or an error naming the command.
ckpt::Result<std::string> run(std::vector<std::string> argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ckpt::sys_error("pipe");
  pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ckpt::sys_error("fork", e);
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(fds[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, size_t(n));
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return ckpt::make_error(EIO, argv[0] + " " + argv[1] + " " + argv.back() + " failed" +
                                     (WIFEXITED(st) && WEXITSTATUS(st) == 127
                                          ? ": not found"
                                          : " (status " + std::to_string(st) + ")"));
  return out;
}

}  // namespace

ckpt::Result<long> time_left(const std::string& job) {
  CKPT_ASSIGN(std::string out, run({"squeue", "-h", "-o", "%L", "-j", job}));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return parse_time_left(out);
}

ckpt::Status requeue(const std::string& job) {
  auto r = run({"scontrol", "requeue", job});
  if (!r.ok()) return r.error();
  return {};
}

}  // namespace cr_slurm
