// A benchmark's answer to --help (its usage on stdout, exit status 0) and to
// an option it does not know (a line saying so and the usage on stderr, 2).
#pragma once

#include <cstdio>
#include <string>

inline int usage_exit(const char* name, const std::string& arg, const char* usage) {
  const bool help = arg == "--help" || arg == "-h";
  if (!help) std::fprintf(stderr, "%s: bad option %s\n", name, arg.c_str());
  std::fputs(usage, help ? stdout : stderr);
  return help ? 0 : 2;
}
