// Memory written in patterns, and checked byte for byte against what the
// pattern must have left: every word the job wrote, and zero elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "spec.hpp"

namespace jobgen {

constexpr size_t kPage = 4096;
constexpr size_t kWordsPerPage = 8;  // written at every 512th byte

// The pages a user of a region writes at one step (replayable from its key).
class PageWalk {
 public:
  PageWalk(Pattern p, size_t pages, int steps, uint64_t key);
  void pages_at(int step, std::vector<size_t>* out);

 private:
  Pattern pattern_;
  size_t pages_;
  int steps_;
  uint64_t rng_state_;
  size_t cursor_ = 0;
};

// One user's slice of a region, mapped at `base`.
struct Slice {
  uint8_t* base = nullptr;
  size_t pages = 0;
  Pattern pattern = Pattern::kBand;
  uint64_t key = 0;
};

Slice slice_of(const Region& g, uint8_t* region_base, size_t user);
void write_step(const Slice& s, PageWalk* walk, int step, std::vector<size_t>* scratch);
// Checks the slice; returns a hash of its content, or dies naming the page.
uint64_t verify(const Slice& s, int steps, const char* what);

// Maps a region as its creator does (before forking the users).
uint8_t* map_region(const Region& g);
void unmap_region(const Region& g, uint8_t* base);
// What the creator does at the end: sysv and /dev/shm names removed.
void remove_region(const Region& g);

}  // namespace jobgen
