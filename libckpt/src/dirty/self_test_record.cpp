#include "dirty/self_test_record.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <optional>

#include "dirty/ledger.hpp"
#include "util/fd.hpp"
#include "util/text.hpp"

namespace ckpt::dirty {

namespace {

// The record's first line.
std::optional<std::string> boot_line() {
  auto id = boot_id();
  if (!id) return std::nullopt;
  return *id + "\n";
}

std::optional<std::string> record_path(const std::string& name) {
  auto dir = runtime_dir("self-test");
  if (!dir) return std::nullopt;
  return *dir + "/" + name;
}

}  // namespace

std::optional<std::string> boot_record(const std::string& name) {
  auto id = boot_line();
  auto path = record_path(name);
  if (!id || !path) return std::nullopt;
  auto text = read_file(*path);
  if (!text.ok() || text->compare(0, id->size(), *id) != 0) return std::nullopt;
  return text->substr(id->size());
}

void write_boot_record(const std::string& name, const std::string& payload) {
  auto id = boot_line();
  auto path = record_path(name);
  if (!id || !path) return;
  (void)replace_file(*path, *id + payload);
}

bool self_test_passed_this_boot(const std::string& name) {
  auto r = boot_record(name);
  return r && r->empty();
}

void record_self_test_pass(const std::string& name) {
  write_boot_record(name, "");
}

}  // namespace ckpt::dirty
