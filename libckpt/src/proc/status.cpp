#include "proc/status.hpp"

#include <cstdlib>

#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::proc {

bool status_field(const std::string& status, const char* key, std::string* out) {
  std::string k = std::string("\n") + key + ":";
  size_t at = status.find(k);
  if (at == std::string::npos) {
    if (status.rfind(k.substr(1), 0) != 0) return false;
    at = 0;
    k = k.substr(1);
  }
  size_t from = at + k.size(), to = status.find('\n', from);
  *out = status.substr(from, to == std::string::npos ? std::string::npos : to - from);
  return true;
}

bool status_hex(const std::string& status, const char* key, uint64_t* out) {
  std::string v;
  if (!status_field(status, key, &v)) return false;
  char* end;
  *out = std::strtoull(v.c_str(), &end, 16);
  return end != v.c_str();
}

std::string comm_of(pid_t pid) {
  auto c = read_file(proc_path(pid, "comm"));
  std::string name = c.ok() ? *c : "?";
  if (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

}  // namespace ckpt::proc
