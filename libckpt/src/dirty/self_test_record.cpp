#include "dirty/self_test_record.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <optional>

#include "dirty/ledger.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::dirty {

namespace {

std::optional<std::string> boot_id() {
  auto text = read_file("/proc/sys/kernel/random/boot_id");
  if (!text.ok() || text->size() < 32) return std::nullopt;
  return text->substr(0, text->find('\n')) + "\n";
}

std::optional<std::string> record_path(const std::string& name) {
  auto dir = runtime_dir("self-test");
  if (!dir) return std::nullopt;
  return *dir + "/" + name;
}

}  // namespace

bool self_test_passed_this_boot(const std::string& name) {
  auto id = boot_id();
  auto path = record_path(name);
  if (!id || !path) return false;
  auto text = read_file(*path);
  return text.ok() && *text == *id;
}

void record_self_test_pass(const std::string& name) {
  auto id = boot_id();
  auto path = record_path(name);
  if (!id || !path) return;
  const std::string tmp = *path + ".tmp." + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return;
  const bool ok = write_all(fd.get(), id->data(), id->size(), tmp).ok();
  fd.reset();
  if (!ok || ::rename(tmp.c_str(), path->c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace ckpt::dirty
