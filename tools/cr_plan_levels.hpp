// cr_plan levels: the interval and the ratios of a three-level checkpoint
// schedule (node-local, partner, shared storage) against checkpointing
// everything to shared storage (docs/policy.md, "Levels").
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace cr_plan {

struct LevelsArgs {
  std::string C, R, mtbf, mix, from;
  bool json = false;
};

void add_levels_options(CLI::App* sub, LevelsArgs& a);
int run_levels(const LevelsArgs& a);

}  // namespace cr_plan
