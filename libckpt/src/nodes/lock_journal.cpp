// Journaled connection locks of cr_noded sessions (lock_journal.hpp).
#include "nodes/lock_journal.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "sockets/tcp_lock.hpp"

namespace ckpt::nodes {

namespace {

int g_fd = -1;
std::string g_path;
bool g_keep = false;

// One line an event: "+" or "-", then each endpoint as family, the 16
// address bytes in hex and the port.
void put_endpoint(std::string& line, const sockets::Endpoint& e) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " %d ", e.family);
  line += buf;
  for (uint8_t b : e.addr) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    line += buf;
  }
  std::snprintf(buf, sizeof buf, " %u", unsigned(e.port));
  line += buf;
}

bool get_endpoint(std::istringstream& in, sockets::Endpoint* e) {
  std::string hex;
  unsigned port = 0;
  if (!(in >> e->family >> hex >> port) || hex.size() != 32 || port > 65535) return false;
  for (size_t i = 0; i < 16; ++i)
    e->addr[i] = uint8_t(std::strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
  e->port = uint16_t(port);
  return true;
}

void record(const sockets::Connection& c, bool locked) {
  if (g_fd < 0) return;
  std::string line = locked ? "+" : "-";
  put_endpoint(line, c.local);
  put_endpoint(line, c.peer);
  line += '\n';
  // One write of a short line with O_APPEND: whole or not at all.
  (void)!::write(g_fd, line.data(), line.size());
}

int release(const std::string& path, double grace) {
  std::ifstream in(path);
  std::vector<sockets::Connection> held;
  std::string line;
  bool incoming = false;
  while (std::getline(in, line)) {
    if (line == "incoming") {
      incoming = true;
      continue;
    }
    std::istringstream words(line);
    std::string op;
    sockets::Connection c;
    if (!(words >> op) || !get_endpoint(words, &c.local) || !get_endpoint(words, &c.peer))
      continue;  // a torn last line: its rule was never added
    std::erase_if(held,
                  [&](const sockets::Connection& h) { return sockets::same_connection(h, c); });
    if (op == "+") held.push_back(c);
  }
  if (incoming && !held.empty()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && double(::time(nullptr) - st.st_mtime) < grace)
      return 0;  // the address may still be on its way: later
  }
  int n = 0;
  for (const sockets::Connection& c : held)
    if (!(incoming && address_here(c.local)) && sockets::unlock_connection(c).ok()) ++n;
  ::unlink(path.c_str());
  return n;
}

}  // namespace

void journal_locks(const std::string& dir) {
  g_path = dir + "/.locks-" + std::to_string(::getpid());
  g_fd = ::open(g_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (g_fd >= 0) sockets::set_lock_observer(record);
}

void journal_incoming() {
  if (g_fd >= 0) (void)!::write(g_fd, "incoming\n", 9);
  g_keep = true;  // whatever is still locked at the end: the daemon decides
}

bool address_here(const sockets::Endpoint& e) {
  sockets::Endpoint any = e;
  any.port = 0;
  sockaddr_storage ss{};
  const socklen_t n = sockets::sockaddr_of(any, &ss);
  const int fd = ::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool here = ::bind(fd, reinterpret_cast<const sockaddr*>(&ss), n) == 0;
  ::close(fd);
  return here;
}

void close_journal() {
  if (g_fd < 0) return;
  sockets::set_lock_observer(nullptr);
  ::close(g_fd);
  g_fd = -1;
  if (!g_keep) ::unlink(g_path.c_str());
}

bool session_alive(int pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  // A zombie (killed, its parent not yet reaping it) holds nothing either.
  std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] != 'Z';
}

int sweep_dead_sessions(const std::string& dir, double grace) {
  std::vector<std::string> dead;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (std::string(e->d_name).rfind(".locks-", 0) != 0) continue;
      const int pid = std::atoi(e->d_name + 7);
      if (pid > 0 && !session_alive(pid)) dead.push_back(dir + "/" + e->d_name);
    }
    ::closedir(d);
  }
  int n = 0;
  for (const std::string& p : dead) n += release(p, grace);
  return n;
}

}  // namespace ckpt::nodes
