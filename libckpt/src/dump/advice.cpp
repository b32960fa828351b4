#include "dump/advice.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "dump/vma_flags.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::dump {

uint32_t advice_of_vmflags(const std::string& vmflags) {
  static const struct {
    const char* name;
    uint32_t bit;
  } kFlags[] = {{"hg", image::kAdvHugePage},   {"nh", image::kAdvNoHugePage},
                {"dc", image::kAdvDontFork},   {"wf", image::kAdvWipeOnFork},
                {"dd", image::kAdvDontDump},   {"mg", image::kAdvMergeable},
                {"sr", image::kAdvSequential}, {"rr", image::kAdvRandom}};
  uint32_t bits = 0;
  std::istringstream in(vmflags);
  std::string word;
  while (in >> word)
    for (const auto& f : kFlags)
      if (word == f.name) bits |= f.bit;
  return bits;
}

namespace {

image::VmaRecord* by_start(std::vector<image::VmaRecord>* vmas, uint64_t start) {
  auto it = std::lower_bound(vmas->begin(), vmas->end(), start,
                             [](const image::VmaRecord& v, uint64_t a) { return v.start < a; });
  return it != vmas->end() && it->start == start ? &*it : nullptr;
}

}  // namespace

Status read_advice(pid_t pid, std::vector<image::VmaRecord>* vmas) {
  auto flags = read_vma_flags(pid);  // no page walk (dump/vma_flags.hpp)
  if (!flags) return read_advice_smaps(pid, vmas);
  for (const VmaFlags& f : *flags)
    if (image::VmaRecord* v = by_start(vmas, f.start)) v->advice = advice_of_flags(f.flags);
  return {};
}

Status read_advice_smaps(pid_t pid, std::vector<image::VmaRecord>* vmas) {
  CKPT_ASSIGN(std::string smaps, read_file(proc_path(pid, "smaps")));
  // Entries start with "start-end perms ..."; their VmFlags line comes last.
  image::VmaRecord* current = nullptr;
  for_each_line(smaps, [&](const std::string& line) {
    if (line.rfind("VmFlags:", 0) == 0) {
      if (current) current->advice = advice_of_vmflags(line.substr(8));
      current = nullptr;
      return true;
    }
    char* end = nullptr;
    const unsigned long long start = std::strtoull(line.c_str(), &end, 16);
    if (end == line.c_str() || *end != '-') return true;  // a counter line
    current = by_start(vmas, start);
    return true;
  });
  return {};
}

}  // namespace ckpt::dump
