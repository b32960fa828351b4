#include "cr_run/log.hpp"

#include <ctime>

namespace cr_run {

void Log::event(const std::string& name, const std::string& text, nlohmann::json fields) {
  if (json_) {
    if (!fields.is_object()) fields = nlohmann::json::object();
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    fields["event"] = name;
    fields["time"] = double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
    std::fprintf(out_, "%s\n", fields.dump().c_str());
  } else {
    std::fprintf(out_, "%s: %s\n", tool_.c_str(), text.c_str());
  }
  std::fflush(out_);
}

}  // namespace cr_run
