// What every part of a running job shares: who it is, how it dies with a
// reason, and system calls that retry the way a careful program does.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "spec.hpp"

namespace jobgen {

struct Self {
  const Job* job = nullptr;
  int index = 0;     // which member this process is
  std::string work;  // the work directory
  std::string tag;   // unique per run: names in /dev/shm and abstract sockets
};
extern Self self;

// Prints "jobgen SEED mI: why" (with errno's text when `errnum`) and exits 1.
[[noreturn]] void die(const std::string& why, int errnum = 0);
[[noreturn]] void die_errno(const std::string& why);

// Moves `fd` to `target` (closing fd) and sets its flags.
void place(int fd, int target, bool cloexec = false, bool nonblock = false);
// A copy of fd at 900 or above, the original closed: out of the way of
// every placement number until it is placed.
int park(int fd);
void set_nonblock(int fd, bool on);

// Whole-buffer I/O that waits in poll when the fd is non-blocking and
// retries after signals.
void write_all(int fd, const void* p, size_t n, const char* what);
void read_all(int fd, void* p, size_t n, const char* what);
void wait_fd(int fd, short events);
// One datagram into p (at most cap bytes); returns its real length.
size_t recv_one(int fd, void* p, size_t cap, const char* what, uint16_t* from_port = nullptr);

void sleep_us(unsigned us);
bool file_exists(const std::string& path);

}  // namespace jobgen
