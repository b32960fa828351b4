// One file of a real generation (FUZZ_FILE: pages.img, addr.img or meta.img)
// replaced by the input; the other two from the seed checkpoint
// ($CKPT_FUZZ_BASE/gen-000001, written with --compress: zstd runs are decoded).
// SnapshotReader::open and verify_all must
// refuse or accept cleanly, never crash. Inputs whose byte 63 is odd keep
// their checksums as they are; the others get them repaired.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_fixup.hpp"
#include "fuzz_scratch.hpp"
#include "image/format.hpp"
#include "image/reader.hpp"

namespace {
std::string g_gen;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* base = std::getenv("CKPT_FUZZ_BASE");
  if (!base) {
    std::fprintf(stderr, "set CKPT_FUZZ_BASE to a checkpoint directory (run_fuzz.sh does)\n");
    std::exit(2);
  }
  std::string dir = fuzz::make_scratch();
  g_gen = dir + "/gen-000001";
  ::mkdir(g_gen.c_str(), 0700);
  for (const char* f : {"pages.img", "addr.img", "meta.img"}) {
    auto v = fuzz::read_all(std::string(base) + "/gen-000001/" + f);
    if (v.empty()) {
      std::fprintf(stderr, "no %s in %s/gen-000001\n", f, base);
      std::exit(2);
    }
    fuzz::write_all(g_gen + "/" + f, v.data(), v.size());
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> f(data, data + size);
  const bool repair = size < 64 || !(data[63] & 1);
  if (repair) {
    if (std::string(FUZZ_FILE) == "meta.img")
      fuzz::fix_meta_file(f);
    else
      fuzz::fix_header(f);
  }
  fuzz::write_all(g_gen + "/" + FUZZ_FILE, f.data(), f.size());
  auto r = ckpt::image::SnapshotReader::open(g_gen);
  if (r.ok()) (void)(*r)->verify_all();
  return 0;
}
