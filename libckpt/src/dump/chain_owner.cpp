#include "dump/chain_owner.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "image/reader.hpp"
#include "image/store.hpp"
#include "util/text.hpp"

namespace ckpt::dump {

namespace {

std::string exe_of(pid_t pid) {
  char buf[4096];
  ssize_t n = ::readlink(proc_path(pid, "exe").c_str(), buf, sizeof buf - 1);
  if (n < 0) return "";
  std::string s(buf, size_t(n));
  const std::string deleted = " (deleted)";
  if (s.size() > deleted.size() &&
      s.compare(s.size() - deleted.size(), deleted.size(), deleted) == 0)
    s.resize(s.size() - deleted.size());
  return s;
}

}  // namespace

Status claim_directory(const std::string& dir, pid_t pid, bool force, std::string* moved_to) {
  CKPT_ASSIGN(std::vector<uint64_t> gens, image::list_generations(dir));
  if (gens.empty()) return {};
  const std::string exe = exe_of(pid);
  std::string why, chain = "unreadable";
  for (auto g = gens.rbegin(); g != gens.rend() && why.empty(); ++g) {
    auto r = image::SnapshotReader::open(image::generation_dir(dir, *g));
    if (!r.ok()) {
      why = "a generation that cannot be read (" + r.error().message + ")";
      break;
    }
    const image::ImageMeta& m = (*r)->meta();
    if (g == gens.rbegin()) chain = hex_id(m.chain_id);
    if (m.process.pid != pid || m.mm.exe_path != exe)
      why = "the chain of PID " + std::to_string(m.process.pid) + " (" + m.mm.exe_path + ")";
  }
  if (why.empty()) return {};
  if (!force)
    return make_error(
        EEXIST,
        dir + " holds " + why + ": choose another directory, or cr_full --force to move it aside");
  // Aside, inside DIR (same file system: renames, nothing copied or deleted).
  std::string aside = dir + "/replaced-" + chain;
  for (int i = 1; ::mkdir(aside.c_str(), 0700) != 0; ++i) {
    if (errno != EEXIST || i > 1000) return sys_error("creating " + aside);
    aside = dir + "/replaced-" + chain + "-" + std::to_string(i);
  }
  for (uint64_t g : gens) {
    const std::string from = image::generation_dir(dir, g);
    const std::string to = aside + from.substr(dir.size());
    if (::rename(from.c_str(), to.c_str()) != 0) return sys_error("moving " + from + " aside");
  }
  CKPT_TRY(image::fsync_dir(aside));
  CKPT_TRY(image::fsync_dir(dir));
  *moved_to = aside;
  return {};
}

}  // namespace ckpt::dump
