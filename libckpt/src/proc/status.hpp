// Fields of /proc/PID/status ("Key:\tvalue" lines).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace ckpt::proc {

// The text after "Key:" on its line, up to the end of the line; false if
// there is no such line.
bool status_field(const std::string& status, const char* key, std::string* out);
// A hexadecimal field ("SigBlk", "CapEff"); false if absent or not a number.
bool status_hex(const std::string& status, const char* key, uint64_t* out);
// The process's name (/proc/PID/comm), "?" if it cannot be read.
std::string comm_of(pid_t pid);

}  // namespace ckpt::proc
