// cr_run's log: one line per event on stderr (or --log FILE), as text or,
// with --json, as one JSON object per line.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace cr_run {

class Log {
 public:
  Log(bool json, FILE* out, std::string tool = "cr_run")
      : json_(json), out_(out), tool_(std::move(tool)) {}
  // `text` is the human line (after "cr_run: ", the tool's name); `fields` the JSON object,
  // to which "event" and "time" are added.
  void event(const std::string& name, const std::string& text, nlohmann::json fields = {});

 private:
  bool json_;
  FILE* out_;
  std::string tool_;
};

}  // namespace cr_run
