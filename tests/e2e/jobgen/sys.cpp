#include "sys.hpp"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace jobgen {

Self self;

void die(const std::string& why, int errnum) {
  std::string line = "jobgen " + std::to_string(self.job ? self.job->seed : 0) + " m" +
                     std::to_string(self.index) + " (pid " + std::to_string(::getpid()) +
                     "): " + why + (errnum ? std::string(": ") + std::strerror(errnum) : "") + "\n";
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
  ::_exit(1);
}

void die_errno(const std::string& why) {
  die(why, errno);
}

void set_nonblock(int fd, bool on) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) != 0)
    die_errno("fcntl F_SETFL on fd " + std::to_string(fd));
}

void place(int fd, int target, bool cloexec, bool nonblock) {
  if (fd != target) {
    if (::dup2(fd, target) != target) die_errno("dup2 to " + std::to_string(target));
    ::close(fd);
  }
  if (::fcntl(target, F_SETFD, cloexec ? FD_CLOEXEC : 0) != 0) die_errno("F_SETFD");
  if (nonblock) set_nonblock(target, true);
}

int park(int fd) {
  int p = ::fcntl(fd, F_DUPFD, 900);
  if (p < 0) die_errno("parking a descriptor");
  ::close(fd);
  return p;
}

void wait_fd(int fd, short events) {
  pollfd p{fd, events, 0};
  while (::poll(&p, 1, -1) < 0)
    if (errno != EINTR) die_errno("poll");
}

void write_all(int fd, const void* buf, size_t n, const char* what) {
  auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      wait_fd(fd, POLLOUT);
      continue;
    }
    if (w <= 0) die_errno(std::string("writing ") + what);
    p += w;
    n -= size_t(w);
  }
}

void read_all(int fd, void* buf, size_t n, const char* what) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) {
      wait_fd(fd, POLLIN);
      continue;
    }
    if (r == 0) die(std::string("end of file reading ") + what);
    if (r < 0) die_errno(std::string("reading ") + what);
    p += r;
    n -= size_t(r);
  }
}

size_t recv_one(int fd, void* p, size_t cap, const char* what, uint16_t* from_port) {
  for (;;) {
    sockaddr_in from{};
    socklen_t len = sizeof from;
    ssize_t r =
        ::recvfrom(fd, p, cap, MSG_TRUNC, from_port ? reinterpret_cast<sockaddr*>(&from) : nullptr,
                   from_port ? &len : nullptr);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) {
      wait_fd(fd, POLLIN);
      continue;
    }
    if (r < 0) die_errno(std::string("receiving ") + what);
    if (from_port) *from_port = ntohs(from.sin_port);
    return size_t(r);
  }
}

void sleep_us(unsigned us) {
  timespec t{time_t(us / 1000000), long(us % 1000000) * 1000};
  while (::nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace jobgen
