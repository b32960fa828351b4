// What the running kernel and the caller's privileges allow: restore
// prerequisites and the dirty-page trackers, each with the reason.
#pragma once

#include <string>
#include <vector>

namespace ckpt {

struct FeatureCheck {
  std::string name;  // "kernel", "restore-pid", "kmod", "pagemap-scan", "soft-dirty", "hash", ...
  bool ok = false;
  std::string detail;  // why it is or is not usable
};

std::vector<FeatureCheck> check_system();

}  // namespace ckpt
