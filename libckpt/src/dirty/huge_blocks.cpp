#include "dirty/huge_blocks.hpp"

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "dirty/ledger.hpp"
#include "util/hash.hpp"

namespace ckpt::dirty {

void HugeBlocks::load(pid_t pid, const TrackerState& s) {
  prev_.clear();
  if (!opts_.keep_huge) return;
  auto text = read_side_state(pid, ".huge", s);
  if (!text) return;  // none, or of another parent: start afresh
  const char* p = text->c_str();
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
  std::string text;
  char line[64];
  for (const auto& [addr, b] : next_) {
    std::snprintf(line, sizeof line, "%" PRIx64 " %" PRIx64 " %u\n", addr, b.hash,
                  (b.quiet ? 1u : 0u) | (b.rewrite ? 2u : 0u));
    text += line;
  }
  write_side_state(pid, ".huge", s, text);
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
