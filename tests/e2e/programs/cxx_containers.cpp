// cxx_containers READY: a C++ program (libstdc++, exceptions, iostreams,
// node-based containers on the heap). It builds a std::map of strings and a
// std::vector of doubles, becomes ready, keeps adding entries for a while, and
// finally checks everything against values it recomputes from scratch, then
// throws and catches an exception (the unwinder's tables and state must
// survive a restore too).
#include <cmath>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "e2e.h"

namespace {

// Unique per i, but inserted in a scattered order of the tree.
std::string key(int i) {
  return std::to_string(e2e_mix(uint64_t(i)) % 1000) + "-" + std::to_string(i);
}
std::string value(int i) {
  std::ostringstream s;
  s << "value " << i << " " << std::hex << e2e_mix(uint64_t(i) * 7);
  return s.str();
}
double element(size_t i) {
  return std::sin(double(i)) * 1e3 + double(i);
}

}  // namespace

int main(int argc, char** argv) {
  e2e_init(argc, argv, 0, "READY");
  std::map<std::string, std::string> m;
  std::vector<double> v;
  int n = 0;
  for (; n < 20000; ++n) m[key(n)] = value(n);
  for (size_t i = 0; i < 500000; ++i) v.push_back(element(i));
  if (e2e_sabotage()) v[1234] += 1;
  e2e_ready(argv[1]);
  for (int step = 0; step < 150; ++step) {  // ~1.5 s of work after ready
    for (int k = 0; k < 100; ++k, ++n) m[key(n)] = value(n);
    v.push_back(element(v.size()));
    e2e_sleep_ms(10);
  }
  e2e_hold();
  for (int i = 0; i < n; ++i) {
    auto it = m.find(key(i));
    if (it == m.end() || it->second != value(i)) e2e_fail("map entry %d lost or wrong", i);
  }
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != element(i)) e2e_fail("vector element %zu is %g, not %g", i, v[i], element(i));
  try {
    throw std::runtime_error("expected");
  } catch (const std::exception& e) {
    if (std::string(e.what()) != "expected") e2e_fail("exception lost its message");
  }
  std::cout.flush();
  e2e_done();
}
