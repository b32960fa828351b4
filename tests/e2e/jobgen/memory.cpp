#include "memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "rng.hpp"
#include "sys.hpp"

namespace jobgen {

PageWalk::PageWalk(Pattern p, size_t pages, int steps, uint64_t key)
    : pattern_(p), pages_(pages), steps_(steps), rng_state_(key) {}

void PageWalk::pages_at(int step, std::vector<size_t>* out) {
  out->clear();
  Pattern p = pattern_;
  if (p == Pattern::kPhase) p = step < steps_ / 2 ? Pattern::kBand : Pattern::kSparse;
  if (p == Pattern::kQuiet) {
    if (step >= steps_ / 4) return;
    p = Pattern::kSparse;
  }
  switch (p) {
    case Pattern::kBand: {
      size_t width = pages_ / 8 ? pages_ / 8 : 1;
      size_t start = (size_t(step) * width) % pages_;
      for (size_t i = 0; i < width; ++i) out->push_back((start + i) % pages_);
      break;
    }
    case Pattern::kSparse: {
      size_t k = 1 + splitmix64(&rng_state_) % (pages_ < 16 ? pages_ : 16);
      for (size_t i = 0; i < k; ++i) out->push_back(splitmix64(&rng_state_) % pages_);
      break;
    }
    case Pattern::kStream: {
      size_t k = pages_ / 32 ? pages_ / 32 : 1;
      for (size_t i = 0; i < k; ++i) out->push_back(cursor_++ % pages_);
      break;
    }
    default:  // kSweep
      for (size_t i = 0; i < pages_; ++i) out->push_back(i);
  }
}

namespace {

uint64_t word(uint64_t key, size_t page, int step, size_t j) {
  return mix(key, page, uint64_t(step), j) | 1;  // never zero: a lost write shows
}

size_t region_bytes(const Region& g) {
  return g.slice_pages * g.users.size() * kPage;
}

std::map<int, int> sysv_ids;  // region -> segment, in its creator

std::string shm_name(const Region& g) {
  return "/jobgen-" + self.tag + "-" + std::to_string(g.id);
}

}  // namespace

Slice slice_of(const Region& g, uint8_t* base, size_t user) {
  Slice s;
  s.base = base + user * g.slice_pages * kPage;
  s.pages = g.slice_pages;
  s.pattern = g.patterns[user];
  s.key = mix(self.job->seed, uint64_t(g.id), user, 0x5eed);
  return s;
}

void write_step(const Slice& s, PageWalk* walk, int step, std::vector<size_t>* scratch) {
  walk->pages_at(step, scratch);
  for (size_t p : *scratch) {
    auto* w = reinterpret_cast<uint64_t*>(s.base + p * kPage);
    for (size_t j = 0; j < kWordsPerPage; ++j) w[j * 64] = word(s.key, p, step, j);
  }
}

uint64_t verify(const Slice& s, int steps, const char* what) {
  std::vector<int> last(s.pages, -1);
  PageWalk walk(s.pattern, s.pages, steps, s.key);
  std::vector<size_t> pages;
  for (int step = 0; step < steps; ++step) {
    walk.pages_at(step, &pages);
    for (size_t p : pages) last[p] = step;
  }
  uint64_t h = 0;
  for (size_t p = 0; p < s.pages; ++p) {
    auto* w = reinterpret_cast<const uint64_t*>(s.base + p * kPage);
    for (size_t i = 0; i < kPage / 8; ++i) {
      uint64_t want = (i % 64 == 0 && last[p] >= 0) ? word(s.key, p, last[p], i / 64) : 0;
      if (w[i] != want)
        die(std::string(what) + ": page " + std::to_string(p) + " word " + std::to_string(i) +
            " holds " + std::to_string(w[i]) + ", not " + std::to_string(want) +
            " (last written at step " + std::to_string(last[p]) + ")");
    }
    h = mix(h, p, uint64_t(last[p] + 1));
  }
  return h;
}

uint8_t* map_region(const Region& g) {
  const size_t len = region_bytes(g);
  void* p = MAP_FAILED;
  switch (g.backing) {
    case Backing::kPrivate:
      p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      break;
    case Backing::kSharedAnon:
      p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      break;
    case Backing::kSysv: {
      int id = ::shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
      if (id < 0) die_errno("shmget");
      p = ::shmat(id, nullptr, 0);
      if (p == reinterpret_cast<void*>(-1)) die_errno("shmat");
      // Removed at once (it lives while attached), or by its creator at the
      // end (g.fd only says which: a segment has no descriptor).
      if (g.fd < 0 && ::shmctl(id, IPC_RMID, nullptr) != 0) die_errno("IPC_RMID");
      if (g.fd >= 0) sysv_ids[g.id] = id;
      return static_cast<uint8_t*>(p);
    }
    case Backing::kMemfd:
    case Backing::kShmFile: {
      int fd = g.backing == Backing::kMemfd
                   ? ::memfd_create(("jobgen-" + std::to_string(g.id)).c_str(), 0)
                   : ::shm_open(shm_name(g).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd < 0) die_errno("creating the file of r" + std::to_string(g.id));
      if (::ftruncate(fd, off_t(len)) != 0) die_errno("ftruncate");
      p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (g.fd >= 0)
        place(park(fd), g.fd);
      else
        ::close(fd);
      // Without a descriptor kept, a /dev/shm file is unlinked now: a
      // deleted file mapped shared.
      if (g.backing == Backing::kShmFile && g.fd < 0) ::shm_unlink(shm_name(g).c_str());
      break;
    }
  }
  if (p == MAP_FAILED) die_errno("mapping r" + std::to_string(g.id));
  return static_cast<uint8_t*>(p);
}

void unmap_region(const Region& g, uint8_t* base) {
  if (g.backing == Backing::kSysv)
    ::shmdt(base);
  else
    ::munmap(base, region_bytes(g));
}

void remove_region(const Region& g) {
  if (g.fd < 0) return;
  if (g.backing == Backing::kSysv) {
    ::shmctl(sysv_ids[g.id], IPC_RMID, nullptr);
    return;
  }
  if (g.backing == Backing::kShmFile) ::shm_unlink(shm_name(g).c_str());
  ::close(g.fd);
}

}  // namespace jobgen
