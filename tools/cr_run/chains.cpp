#include "cr_run/chains.hpp"

#include <ckpt/ckpt.h>

#include <unistd.h>
#include <ckpt/ckpt.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace cr_run {

namespace fs = std::filesystem;

// The layout is the library's (ckpt::resolve_checkpoint_dir reads it for
// every other tool).
std::string chain_dir(const std::string& dir, uint64_t chain) {
  return ckpt::run_chain_dir(dir, chain);
}

std::vector<uint64_t> list_chains(const std::string& dir) {
  return ckpt::run_chains(dir);
}

std::vector<uint64_t> generations(const std::string& chain_dir) {
  // Through libckpt's C API, as any launcher would.
  ckpt_ctx* ctx = nullptr;
  if (ckpt_ctx_new(CKPT_API_VERSION, &ctx) < 0) return {};
  std::vector<uint64_t> gens(64);
  size_t n = gens.size();
  int rc = ckpt_generations(ctx, chain_dir.c_str(), gens.data(), &n);
  if (rc == -ERANGE) {
    gens.resize(n);
    rc = ckpt_generations(ctx, chain_dir.c_str(), gens.data(), &n);
  }
  ckpt_ctx_free(ctx);
  if (rc < 0) return {};
  gens.resize(n);
  return gens;
}

Point newest_committed(const std::string& dir) {
  auto chains = list_chains(dir);
  for (auto it = chains.rbegin(); it != chains.rend(); ++it) {
    auto g = generations(chain_dir(dir, *it));
    if (!g.empty()) return {*it, g.back()};
  }
  return {};
}

uint64_t next_chain(const std::string& dir, const std::string& other) {
  uint64_t top = 0;
  for (const std::string& d : {dir, other})
    for (uint64_t c : list_chains(d)) top = std::max(top, c);
  return top + 1;
}

void prune(const std::string& dir, uint64_t keep) {
  auto chains = list_chains(dir);
  uint64_t kept = 0;
  for (auto it = chains.rbegin(); it != chains.rend(); ++it) {
    const std::string path = chain_dir(dir, *it);
    if (kept < keep) {
      if (!generations(path).empty()) ++kept;
      continue;
    }
    const std::string doomed = dir + "/.deleting-" + fs::path(path).filename().string();
    std::error_code ec;
    if (::rename(path.c_str(), doomed.c_str()) == 0) fs::remove_all(doomed, ec);
  }
  // Leftovers of a prune that was interrupted.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(".deleting-", 0) == 0) fs::remove_all(e.path(), ec);
}

}  // namespace cr_run
