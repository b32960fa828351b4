#include "dirty/huge_blocks.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "dirty/ledger.hpp"
#include "util/fd.hpp"
#include "util/hash.hpp"
#include "util/text.hpp"

namespace ckpt::dirty {

namespace {

std::string header(const TrackerState& s, uint64_t generation) {
  return hex_id(s.chain_id) + " " + std::to_string(generation) + "\n";
}

}  // namespace

HugeOptions HugeOptions::from_env() {
  HugeOptions o;
  if (const char* v = ::getenv("LIBCKPT_KEEP_HUGE_PAGES"))
    o.keep_huge = !(std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0);
  return o;
}

void HugeBlocks::load(pid_t pid, const TrackerState& s) {
  prev_.clear();
  if (!opts_.keep_huge) return;
  auto path = ledger_side_file(pid, ".huge", false);
  if (!path) return;
  auto text = read_file(*path);
  if (!text.ok()) return;
  const std::string want = header(s, s.prev_generation);
  if (text->compare(0, want.size(), want) != 0) return;  // another parent: start afresh
  const char* p = text->c_str() + want.size();
  uint64_t addr, hash;
  int used = 0;
  while (std::sscanf(p, "%" SCNx64 " %" SCNx64 "\n%n", &addr, &hash, &used) == 2) {
    prev_[addr] = hash;
    p += used;
  }
}

void HugeBlocks::save(pid_t pid, const TrackerState& s) const {
  if (!opts_.keep_huge) return;
  auto path = ledger_side_file(pid, ".huge", true);
  if (!path) return;
  std::string text = header(s, s.generation);
  char line[48];
  for (const auto& [addr, hash] : next_) {
    std::snprintf(line, sizeof line, "%" PRIx64 " %" PRIx64 "\n", addr, hash);
    text += line;
  }
  // Written whole, then renamed: a reader sees the old hashes or the new ones.
  const std::string tmp = *path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) return;
  if (!write_all(fd.get(), text.data(), text.size(), tmp).ok()) return;
  fd.reset();
  (void)::rename(tmp.c_str(), path->c_str());
}

void HugeBlocks::examine(const std::vector<mem::Range>& huge, const ReadBlockFn& read,
                         std::vector<mem::Range>* quiet) {
  if (!opts_.keep_huge) return;
  std::unique_ptr<uint8_t[]> buf;
  for (const mem::Range& r : huge) {
    // PMD mappings are 2 MiB-aligned; anything else is not ours to judge.
    for (uint64_t b = r.addr; b + kHugeBlock <= r.end(); b += kHugeBlock) {
      if (b % kHugeBlock != 0) break;
      if (!buf) buf.reset(new uint8_t[kHugeBlock]);
      if (!read(b, buf.get())) {
        kept_bytes_ += kHugeBlock;
        continue;
      }
      const uint64_t h = xxh3(buf.get(), kHugeBlock);
      next_[b] = h;
      auto it = prev_.find(b);
      if (it != prev_.end() && it->second == h) {
        mem::append_range(*quiet, b, kHugeBlock);
        quiet_bytes_ += kHugeBlock;
      } else {
        kept_bytes_ += kHugeBlock;
      }
    }
  }
}

}  // namespace ckpt::dirty
