// A checkpoint directory as every tool and the C API take it: a chain itself
// (gen-NNNNNN inside), or a directory of chains as cr_run writes them
// (DIR/chain-NNNNNN, each a chain: a new full supersedes the chain before it,
// so a launcher that keeps several chains keeps them side by side).
#include <dirent.h>

#include <algorithm>
#include <ckpt/ckpt.hpp>
#include <cstdio>
#include <cstring>

#include "image/store.hpp"

namespace ckpt {

std::string run_chain_dir(const std::string& dir, uint64_t chain) {
  char name[32];
  std::snprintf(name, sizeof name, "chain-%06llu", static_cast<unsigned long long>(chain));
  return dir + "/" + name;
}

std::vector<uint64_t> run_chains(const std::string& dir) {
  std::vector<uint64_t> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    // Only the names run_chain_dir() spells: "chain-" and six digits.
    const char* digits = e->d_name + 6;
    if (std::strncmp(e->d_name, "chain-", 6) != 0 || std::strlen(digits) != 6 ||
        std::strspn(digits, "0123456789") != 6)
      continue;
    if (uint64_t n = std::strtoull(digits, nullptr, 10)) out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::string> resolve_checkpoint_dir(const std::string& dir, uint64_t chain) {
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(dir));
  const std::vector<uint64_t> chains = run_chains(dir);
  if (chain) {
    if (!gens.empty())
      return make_error(EINVAL, dir +
                                    " is a chain itself (it holds generations), not a directory "
                                    "of chains: --chain does not apply");
    const std::string c = run_chain_dir(dir, chain);
    if (std::find(chains.begin(), chains.end(), chain) == chains.end())
      return make_error(ENOENT, "no chain " + std::to_string(chain) + " in " + dir + " (no " +
                                    c.substr(dir.size() + 1) + ")");
    return c;
  }
  if (!gens.empty() || chains.empty()) return dir;
  for (auto it = chains.rbegin(); it != chains.rend(); ++it) {
    const std::string c = run_chain_dir(dir, *it);
    auto g = image::list_generations(c);
    if (g.ok() && !g->empty()) return c;
  }
  return dir;  // chains without a committed generation: "no checkpoint in DIR"
}

}  // namespace ckpt
