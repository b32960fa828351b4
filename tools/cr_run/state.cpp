#include "cr_run/state.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/clock.hpp"

namespace cr_run {

std::string state_path(const std::string& dir) {
  return dir + "/cr_run.json";
}

ckpt::Status save(const std::string& dir, const State& s) {
  nlohmann::json j = {{"command", s.command},
                      {"interval_seconds", s.schedule.interval_s},
                      {"incrementals", s.schedule.incrementals},
                      {"keep", s.schedule.keep},
                      {"restarts", s.schedule.restarts},
                      {"interval_auto", s.schedule.auto_interval},
                      {"mtbf_seconds", s.schedule.mtbf_s},
                      {"buffered", s.schedule.buffered},
                      {"local_dir", s.schedule.local_dir},
                      {"flush_rate", s.schedule.flush_rate},
                      {"partner", s.schedule.partner},
                      {"partner_token", s.schedule.partner_token},
                      {"partner_name", s.schedule.partner_name},
                      {"restarts_used", s.restarts_used},
                      {"chain", s.chain},
                      {"root_pid", s.root},
                      {"root_start", s.root_start},
                      {"stopped", s.stopped},
                      {"finished", s.finished},
                      {"exit_code", s.exit_code}};
  auto costs = [](const std::map<std::string, Cost>& m) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [level, c] : m) o[level] = {{"n", c.n}, {"seconds", c.seconds}};
    return o;
  };
  if (!s.checkpoint_costs.empty() || !s.restore_costs.empty())
    j["measured"] = {{"checkpoint", costs(s.checkpoint_costs)},
                     {"restore", costs(s.restore_costs)}};
  return write_durably(state_path(dir), j.dump(1) + "\n");
}

ckpt::Status write_durably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ckpt::sys_error("creating " + tmp);
  bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size()) && ::fsync(fd) == 0;
  int e = errno;
  ::close(fd);
  if (!ok) return ckpt::sys_error("writing " + tmp, e);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return ckpt::sys_error("renaming " + tmp);
  return {};
}

ckpt::Result<State> load(const std::string& dir) {
  std::ifstream in(state_path(dir));
  if (!in) return ckpt::make_error(ENOENT, state_path(dir) + ": no cr_run job in this directory");
  State s;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    s.command = j.at("command").get<std::vector<std::string>>();
    s.schedule.interval_s = j.at("interval_seconds").get<double>();
    s.schedule.incrementals = j.at("incrementals").get<uint64_t>();
    s.schedule.keep = j.at("keep").get<uint64_t>();
    s.schedule.restarts = j.at("restarts").get<uint64_t>();
    s.schedule.auto_interval = j.value("interval_auto", false);  // absent before --interval auto
    s.schedule.mtbf_s = j.value("mtbf_seconds", 0.0);
    s.schedule.buffered = j.value("buffered", false);            // absent before --buffered
    s.schedule.local_dir = j.value("local_dir", std::string());  // absent before --local
    s.schedule.flush_rate = j.value("flush_rate", 0.0);
    s.schedule.partner = j.value("partner", std::string());  // absent before --partner
    s.schedule.partner_token = j.value("partner_token", std::string());
    s.schedule.partner_name = j.value("partner_name", std::string());
    s.restarts_used = j.at("restarts_used").get<uint64_t>();
    s.chain = j.at("chain").get<uint64_t>();
    s.root = j.at("root_pid").get<pid_t>();
    s.root_start = j.at("root_start").get<uint64_t>();
    s.stopped = j.value("stopped", false);  // absent before the stop request
    if (j.contains("measured")) {           // absent before the levels' costs were recorded
      auto costs = [](const nlohmann::json& o, std::map<std::string, Cost>& m) {
        for (const auto& [level, c] : o.items())
          m[level] = {c.at("n").get<uint64_t>(), c.at("seconds").get<double>()};
      };
      costs(j["measured"].value("checkpoint", nlohmann::json::object()), s.checkpoint_costs);
      costs(j["measured"].value("restore", nlohmann::json::object()), s.restore_costs);
    }
    s.finished = j.at("finished").get<bool>();
    s.exit_code = j.at("exit_code").get<int>();
  } catch (const std::exception& e) {
    return ckpt::make_error(EINVAL, state_path(dir) + ": unreadable: " + e.what());
  }
  if (s.command.empty()) return ckpt::make_error(EINVAL, state_path(dir) + ": no command");
  return s;
}

uint64_t start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  // The name (field 2) may hold spaces and parentheses: fields follow the last ')'.
  size_t p = line.rfind(')');
  if (p == std::string::npos) return 0;
  std::istringstream rest(line.substr(p + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(rest >> field)) return 0;
  return std::strtoull(field.c_str(), nullptr, 10);
}

std::string new_part_name() {
  uint8_t r[8] = {};
  if (::getrandom(r, sizeof r, 0) != ssize_t(sizeof r)) {
    const uint64_t t = uint64_t(ckpt::unix_now_seconds() * 1e6) ^ uint64_t(::getpid());
    std::memcpy(r, &t, sizeof r);
  }
  char out[32];
  std::snprintf(out, sizeof out, "run-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
                r[4], r[5], r[6], r[7]);
  return out;
}

}  // namespace cr_run
