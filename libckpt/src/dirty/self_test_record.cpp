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

std::optional<std::string> boot_record(const std::string& name) {
  auto id = boot_id();
  auto path = record_path(name);
  if (!id || !path) return std::nullopt;
  auto text = read_file(*path);
  if (!text.ok() || text->compare(0, id->size(), *id) != 0) return std::nullopt;
  return text->substr(id->size());
}

void write_boot_record(const std::string& name, const std::string& payload) {
  auto id = boot_id();
  auto path = record_path(name);
  if (!id || !path) return;
  const std::string tmp = *path + ".tmp." + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return;
  const std::string text = *id + payload;
  const bool ok = write_all(fd.get(), text.data(), text.size(), tmp).ok();
  fd.reset();
  if (!ok || ::rename(tmp.c_str(), path->c_str()) != 0) ::unlink(tmp.c_str());
}

bool self_test_passed_this_boot(const std::string& name) {
  auto r = boot_record(name);
  return r && r->empty();
}

void record_self_test_pass(const std::string& name) {
  write_boot_record(name, "");
}

}  // namespace ckpt::dirty
