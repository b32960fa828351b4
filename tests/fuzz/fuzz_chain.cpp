// A chain of two real generations ($CKPT_FUZZ_BASE: gen-000001, a full, and
// gen-000002, an incremental) whose newest meta.img is the input (checksums
// repaired unless byte 63 is odd): open_chain (the hash links between the
// generations), the reverse-scan plan and every run's check.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_fixup.hpp"
#include "fuzz_scratch.hpp"
#include "image/chain.hpp"
#include "image/reader.hpp"

namespace {
std::string g_dir;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* base = std::getenv("CKPT_FUZZ_BASE");
  if (!base) {
    std::fprintf(stderr, "set CKPT_FUZZ_BASE to a checkpoint directory (run_fuzz.sh does)\n");
    std::exit(2);
  }
  g_dir = fuzz::make_scratch();
  for (const char* g : {"gen-000001", "gen-000002"}) {
    ::mkdir((g_dir + "/" + g).c_str(), 0700);
    for (const char* f : {"pages.img", "addr.img", "meta.img"}) {
      auto v = fuzz::read_all(std::string(base) + "/" + g + "/" + f);
      if (v.empty()) {
        std::fprintf(stderr, "no %s/%s in %s\n", g, f, base);
        std::exit(2);
      }
      fuzz::write_all(g_dir + "/" + g + "/" + f, v.data(), v.size());
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> f(data, data + size);
  if (size < 64 || !(data[63] & 1)) fuzz::fix_meta_file(f);
  fuzz::write_all(g_dir + "/gen-000002/meta.img", f.data(), f.size());
  auto chain = ckpt::image::open_chain(g_dir, 2);
  if (!chain.ok()) return 0;
  ckpt::image::RestorePlan plan = ckpt::image::plan_chain(*chain);
  (void)plan;
  for (const auto& link : chain->links) (void)link->verify_all();
  return 0;
}
