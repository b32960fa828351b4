// Which unauthenticated connections cr_recv keeps (docs/migration.md,
// "Connections nobody has authenticated yet"). A new connection is always
// admitted; to make room, the oldest connection of its own source goes when
// that source holds its limit, else, when the total is at its limit, the
// oldest of the source holding the most. So a client that opens many
// connections only ever pushes out its own, and a sender that authenticates
// within its deadline cannot be crowded out by one other source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

namespace ckpt::migrate {

class Admission {
 public:
  Admission(size_t max_total, size_t max_per_source);
  // Admits connection `id` (ids increase with time) from `source` (its
  // address, without the port); returns the connections to drop first.
  std::vector<uint64_t> admit(uint64_t id, const std::string& source);
  void remove(uint64_t id);
  size_t size() const { return order_.size(); }
  size_t from(const std::string& source) const;

 private:
  struct Entry {
    uint64_t id;
    std::string source;
  };
  void evict_oldest_of(const std::string& source, std::vector<uint64_t>* out);
  size_t max_total_, max_per_source_;
  std::list<Entry> order_;  // oldest first
  std::map<std::string, size_t> per_source_;
};

}  // namespace ckpt::migrate
