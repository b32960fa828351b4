#include "image/chain_verify.hpp"

#include <map>
#include <memory>

#include "image/chain_link.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"

namespace ckpt::image {

Status verify_chains(const std::string& dir, const std::vector<uint64_t>& gens, uint64_t only) {
  std::map<uint64_t, std::unique_ptr<SnapshotReader>> open;
  // Opens and fully verifies generation g once; nullptr when its directory is missing.
  auto get = [&](uint64_t g) -> Result<const SnapshotReader*> {
    if (auto it = open.find(g); it != open.end()) return it->second.get();
    CKPT_ASSIGN(auto r, SnapshotReader::open(generation_dir(dir, g)));
    CKPT_TRY(check_directory_holds(*r, g));
    CKPT_TRY(r->verify_all());
    return (open[g] = std::move(r)).get();
  };
  for (uint64_t g : gens) {
    if (only && g != only) continue;
    CKPT_ASSIGN(const SnapshotReader* child, get(g));
    for (size_t steps = 0; child->meta().parent_generation != 0; ++steps) {
      const uint64_t p = child->meta().parent_generation;
      if (steps > gens.size())  // only reachable if a directory held another generation
        return make_error(EBADMSG, "generation " + std::to_string(g) + ": the chain loops");
      if (p >= child->meta().generation)
        return make_error(EBADMSG,
                          child->path() + ": names parent " + std::to_string(p) + " (not older)");
      auto parent = get(p);
      if (!parent.ok()) {
        if (parent.error().code == ENOENT)
          return make_error(ENOENT, "generation " + std::to_string(g) + " needs generation " +
                                        std::to_string(p) + ", which is missing from " + dir);
        return parent.error();
      }
      CKPT_TRY(check_parent_link(*child, **parent));
      if ((*parent)->meta().chain_id != child->meta().chain_id)
        return make_error(EBADMSG,
                          (*parent)->path() + ": belongs to another chain than " + child->path());
      child = *parent;
    }
  }
  return {};
}

}  // namespace ckpt::image
