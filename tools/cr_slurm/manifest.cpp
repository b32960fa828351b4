#include "cr_slurm/manifest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

namespace cr_slurm {

ckpt::Status record_run(const Task& t) {
  const std::string path = t.dir + "/slurm.json";
  nlohmann::json m = nlohmann::json::object();
  if (std::ifstream in(path); in) m = nlohmann::json::parse(in, nullptr, false);
  if (!m.is_object() || !m.contains("runs") || !m["runs"].is_array())
    m = {{"job", t.job}, {"step", t.step}, {"task", t.task}, {"runs", nlohmann::json::array()}};
  const char* node = std::getenv("SLURMD_NODENAME");
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  m["runs"].push_back({{"node", node ? node : ""},
                       {"restart_count", restarts ? std::atoi(restarts) : 0},
                       {"started", double(std::time(nullptr))}});
  const std::string text = m.dump(1) + "\n", tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ckpt::sys_error("creating " + tmp);
  const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return ckpt::sys_error("writing " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ckpt::sys_error("renaming " + tmp);
  return {};
}

}  // namespace cr_slurm
