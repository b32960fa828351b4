// cr_check [--json]: what this kernel supports, and why not when it does not.
#include <ckpt/check.hpp>
#include <cstdio>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Report which dirty-page trackers and restore prerequisites work here."};
  bool json = false;
  app.add_flag("--json", json, "machine-readable output");
  if (int rc = ckpt::cli::parse(app, argc, argv); rc >= 0) return rc;
  auto checks = ckpt::check_system();
  if (json) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& c : checks) j[c.name] = {{"ok", c.ok}, {"detail", c.detail}};
    ckpt::cli::print_json(j);
    return 0;
  }
  for (const auto& c : checks)
    std::printf("%-13s %-4s %s\n", c.name.c_str(),
                c.name == "kernel" ? ""
                : c.ok             ? "yes"
                                   : "no",
                c.detail.c_str());
  return 0;
}
