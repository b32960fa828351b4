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
  unsigned flags;
  int used = 0;
  while (std::sscanf(p, "%" SCNx64 " %" SCNx64 " %u\n%n", &addr, &hash, &flags, &used) == 3) {
    prev_[addr] = Block{hash, (flags & 1) != 0, (flags & 2) != 0};
    p += used;
  }
}

void HugeBlocks::save(pid_t pid, const TrackerState& s) const {
  if (!opts_.keep_huge) return;
  auto path = ledger_side_file(pid, ".huge", true);
  if (!path) return;
  std::string text = header(s, s.generation);
  char line[64];
  for (const auto& [addr, b] : next_) {
    std::snprintf(line, sizeof line, "%" PRIx64 " %" PRIx64 " %u\n", addr, b.hash,
                  (b.quiet ? 1u : 0u) | (b.rewrite ? 2u : 0u));
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

namespace {

bool contains(const std::vector<mem::Range>& rs, uint64_t addr) {
  for (const mem::Range& r : rs)
    if (r.addr <= addr && addr < r.end()) return true;
  return false;
}

bool overlaps(const std::vector<mem::Range>& rs, uint64_t start, uint64_t end) {
  for (const mem::Range& r : rs)
    if (r.addr < end && start < r.end()) return true;
  return false;
}

}  // namespace

void HugeBlocks::examine(mem::Range piece, const std::vector<mem::Range>& unprotected,
                         const std::vector<mem::Range>& mapped,
                         const std::vector<mem::Range>& written, const ReadBlockFn& read,
                         std::vector<mem::Range>* quiet, std::vector<mem::Range>* repair) {
  if (!opts_.keep_huge) return;
  // Blocks protected as quiet last time.
  for (auto it = prev_.lower_bound(piece.addr); it != prev_.end() && it->first < piece.end();
       ++it) {
    const uint64_t b = it->first;
    if (!it->second.quiet || b + kHugeBlock > piece.end()) continue;
    if (contains(mapped, b)) {
      if (!contains(unprotected, b)) next_[b] = it->second;  // still huge, protected, unwritten
    } else if (overlaps(written, b, b + kHugeBlock)) {
      // Written although its content had not changed: split by that write.
      mem::append_range(*repair, b, kHugeBlock);
      next_[b] = Block{0, false, true};
      repaired_bytes_ += kHugeBlock;
    }
  }
  std::unique_ptr<uint8_t[]> buf;
  for (const mem::Range& r : unprotected) {
    // PMD mappings are 2 MiB-aligned; anything else is not ours to judge.
    for (uint64_t b = r.addr; b + kHugeBlock <= r.end(); b += kHugeBlock) {
      if (b % kHugeBlock != 0) break;
      auto it = prev_.find(b);
      if (it != prev_.end() && it->second.rewrite) {
        next_[b] = it->second;  // saved whole, never judged by its hash again
        kept_bytes_ += kHugeBlock;
        continue;
      }
      if (!buf) buf.reset(new uint8_t[kHugeBlock]);
      if (!read(b, buf.get())) {
        kept_bytes_ += kHugeBlock;
        continue;
      }
      const uint64_t h = xxh3(buf.get(), kHugeBlock);
      const bool same = it != prev_.end() && !it->second.quiet && it->second.hash == h;
      next_[b] = Block{h, same, false};
      if (same) {
        mem::append_range(*quiet, b, kHugeBlock);
        quiet_bytes_ += kHugeBlock;
      } else {
        kept_bytes_ += kHugeBlock;
      }
    }
  }
}

}  // namespace ckpt::dirty
