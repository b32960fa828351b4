#include "cr_slurm/manifest.hpp"

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cr_run/state.hpp"

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
  return cr_run::write_durably(path, m.dump(1) + "\n");
}

}  // namespace cr_slurm
