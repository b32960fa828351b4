// meta_fuzz GEN_DIR SEED: rewrites GEN_DIR/meta.img with one seeded mutation
// whose checksums are recomputed (record hashes, header hash), so that only
// the meaning of the metadata can refuse it. Prints one line: the mutation's
// kind (what the caller may expect of a tool reading it) and what it did.
//   tracker  the Tracker record names a tracker this build does not know
//   version  the header's format version is one this build does not read
//   other    anything else: a record's payload byte changed, a record cut,
//            grown or given an unknown type, an unknown record appended, the
//            tracker's descriptor changed, a File record of unknown kind
// The old file is unlinked first: GEN_DIR may hold hard links into a
// pristine chain.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "image/format.hpp"
#include "util/hash.hpp"

using namespace ckpt::image;

namespace {

struct Record {
  uint32_t type;
  std::vector<uint8_t> payload;
};

void put32(std::vector<uint8_t>& o, uint32_t v) {
  for (int i = 0; i < 4; ++i) o.push_back(uint8_t(v >> (8 * i)));
}

std::vector<uint8_t> tracker_payload(const std::string& name, int32_t fd) {
  std::vector<uint8_t> p;
  put32(p, uint32_t(name.size()));
  p.insert(p.end(), name.begin(), name.end());
  put32(p, uint32_t(fd));
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: meta_fuzz GEN_DIR SEED\n");
    return 2;
  }
  const std::string path = std::string(argv[1]) + "/" + kMetaFile;
  const unsigned long seed = std::stoul(argv[2]);
  std::mt19937_64 rng(seed);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), {});
  FileHeader h;
  std::string err;
  if (!decode_header(file.data(), file.size(), kMetaMagic, &h, &err)) {
    std::fprintf(stderr, "meta_fuzz: %s: %s\n", path.c_str(), err.c_str());
    return 1;
  }
  std::vector<Record> recs;
  for (size_t at = h.header_size, i = 0; i < h.count; ++i) {
    uint32_t type, len;
    std::memcpy(&type, &file[at], 4);
    std::memcpy(&len, &file[at + 4], 4);
    recs.push_back({type, std::vector<uint8_t>(&file[at + 8], &file[at + 8 + len])});
    at += 16 + len;
  }
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  auto find = [&](RecordType t) -> Record* {
    for (Record& r : recs)
      if (r.type == uint32_t(t)) return &r;
    return nullptr;
  };
  const char* kind = "other";
  std::string what;
  switch (seed % 9) {
    case 0: {  // a tracker name this build does not know
      static const char* const names[] = {"bogus", "pagemap-scan2", "soft-dirty\nsecond line",
                                          "HASH"};
      std::string name = names[pick(4)];
      if (pick(3) == 0) name = std::string(1 + pick(300), char(1 + pick(254)));
      Record* t = find(RecordType::kTracker);
      if (!t) return std::fprintf(stderr, "meta_fuzz: no tracker record\n"), 1;
      t->payload = tracker_payload(name, -1);
      kind = "tracker";
      what = "tracker name of " + std::to_string(name.size()) + " bytes";
      break;
    }
    case 1: {  // a format version this build does not read
      static const uint32_t versions[] = {0, 3, 99, 0xffffffffu};
      h.version = versions[pick(4)];
      kind = "version";
      what = "version " + std::to_string(h.version);
      break;
    }
    case 2: {  // the tracker's descriptor in the process
      static const int32_t fds[] = {-7, 0, 1, 2, 3, 1023, 65536, 0x7fffffff};
      Record* t = find(RecordType::kTracker);
      if (!t || t->payload.size() < 8) return std::fprintf(stderr, "meta_fuzz: no tracker\n"), 1;
      const int32_t fd = fds[pick(8)];
      std::memcpy(&t->payload[t->payload.size() - 4], &fd, 4);
      what = "tracker fd " + std::to_string(fd);
      break;
    }
    case 3: {  // an unknown record type appended (skipped by readers: docs/format.md)
      std::vector<uint8_t> p(pick(64));
      for (uint8_t& b : p) b = uint8_t(rng());
      recs.insert(recs.begin() + long(pick(recs.size() + 1)), {uint32_t(1000 + pick(1000)), p});
      what = "unknown record appended";
      break;
    }
    case 4: {  // a record's type made unknown (its content is then missing)
      Record& r = recs[pick(recs.size())];
      what = "record type " + std::to_string(r.type) + " made unknown";
      r.type = 900 + uint32_t(pick(50));
      break;
    }
    case 5:
    case 6: {  // one payload byte changed (any record but the chain link)
      Record& r = recs[pick(recs.size() - 1)];
      if (r.payload.empty()) break;
      const size_t at = pick(r.payload.size());
      r.payload[at] ^= uint8_t(1 + pick(255));
      what = "record type " + std::to_string(r.type) + " byte " + std::to_string(at);
      break;
    }
    case 7: {  // a record cut short or grown
      Record& r = recs[pick(recs.size() - 1)];
      if (pick(2) && !r.payload.empty())
        r.payload.resize(pick(r.payload.size()));
      else
        r.payload.resize(r.payload.size() + 1 + pick(16), uint8_t(rng()));
      what = "record type " + std::to_string(r.type) + " now " + std::to_string(r.payload.size()) +
             " bytes";
      break;
    }
    case 8: {  // a File record of a kind no build knows
      for (Record& r : recs)
        if (r.type == uint32_t(RecordType::kFile) && r.payload.size() >= 8) {
          const uint32_t k = 100 + uint32_t(pick(1000));
          std::memcpy(&r.payload[4], &k, 4);
          what = "file kind " + std::to_string(k);
          break;
        }
      break;
    }
  }
  std::vector<uint8_t> body;
  for (const Record& r : recs) {
    std::vector<uint8_t> rec;
    put32(rec, r.type);
    put32(rec, uint32_t(r.payload.size()));
    rec.insert(rec.end(), r.payload.begin(), r.payload.end());
    const uint64_t hash = ckpt::xxh3(rec.data(), rec.size());
    for (int i = 0; i < 8; ++i) rec.push_back(uint8_t(hash >> (8 * i)));
    body.insert(body.end(), rec.begin(), rec.end());
  }
  h.count = recs.size();
  std::vector<uint8_t> out = encode_header(h);
  out.insert(out.end(), body.begin(), body.end());
  ::unlink(path.c_str());
  std::ofstream o(path, std::ios::binary);
  o.write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size()));
  if (!o.good()) return 1;
  std::printf("%s %s\n", kind, what.empty() ? "(no change)" : what.c_str());
  return 0;
}
