// cr_check [--json]: what this kernel supports, and why not when it does not.
#include <ckpt/check.hpp>
#include <ckpt/tracker.hpp>
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Report which dirty-page trackers and restore prerequisites work here."};
  bool json = false;
  app.add_flag("--json", json, "machine-readable output");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  auto checks = ckpt::check_system();
  // The trackers in their order of preference, and the one `auto` picks:
  // the first that works here.
  std::vector<std::string> trackers;
  std::string picked;
  for (const auto& c : checks)
    if (ckpt::find_tracker(c.name)) {
      trackers.push_back(c.name);
      if (c.ok && picked.empty()) picked = c.name;
    }
  if (json) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& c : checks) j[c.name] = {{"ok", c.ok}, {"detail", c.detail}};
    j["trackers"] = trackers;
    j["auto"] = picked;
    ckpt::cli::print_json(j);
    return 0;
  }
  for (const auto& c : checks)
    std::printf("%-13s %-4s %s\n", c.name.c_str(),
                c.name == "kernel" ? ""
                : c.ok             ? "yes"
                                   : "no",
                c.detail.c_str());
  std::printf("%-13s %-4s %s\n", "auto", "->", picked.c_str());
  return 0;
}
