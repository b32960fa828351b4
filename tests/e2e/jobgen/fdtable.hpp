// A process's descriptor table as the program sees it: numbers, what each
// one is, its flags. Taken when the job is set up and again at the end: a
// restore must give every descriptor back at its number, as it was.
#pragma once

#include <string>
#include <vector>

namespace jobgen {

struct FdEntry {
  int fd;
  std::string what;  // the kind of object (pipe, socket family/type, path...)
  int fd_flags;      // FD_CLOEXEC
  int fl_flags;      // access mode, O_NONBLOCK, O_APPEND
};

std::vector<FdEntry> fd_table();
// Dies naming the first difference.
void compare_fd_tables(const std::vector<FdEntry>& before, const std::vector<FdEntry>& after);
// Dies unless a and b share one open file description (a flag set on one
// shows on the other).
void check_shared(int a, int b, const char* what);

}  // namespace jobgen
