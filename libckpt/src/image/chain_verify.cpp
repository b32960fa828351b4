#include "image/chain_verify.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>

#include "image/chain_link.hpp"
#include "image/job_image.hpp"
#include "image/reader.hpp"
#include "image/store.hpp"

namespace ckpt::image {

namespace {

// Every snapshot read once, fully verified, by its directory.
class Verified {
 public:
  Result<const SnapshotReader*> get(const std::string& path, uint64_t generation) {
    if (auto it = open_.find(path); it != open_.end()) return it->second.get();
    CKPT_ASSIGN(auto r, SnapshotReader::open(path));
    CKPT_TRY(check_directory_holds(*r, generation));
    CKPT_TRY(r->verify_all());
    return (open_[path] = std::move(r)).get();
  }

 private:
  std::map<std::string, std::unique_ptr<SnapshotReader>> open_;
};

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Member `pid`'s chain below generation `g` (its snapshot `child`): every
// parent present, of the same chain, older, and the one it was taken on.
Status verify_ancestors(Verified& v, const std::string& dir, size_t ngens, uint64_t g, pid_t pid,
                        pid_t root, const SnapshotReader* child) {
  for (size_t steps = 0; child->meta().parent_generation != 0; ++steps) {
    const uint64_t p = child->meta().parent_generation;
    if (steps > ngens)  // only reachable if a directory held another generation
      return make_error(EBADMSG, "generation " + std::to_string(g) + ": the chain loops");
    if (p >= child->meta().generation)
      return make_error(EBADMSG,
                        child->path() + ": names parent " + std::to_string(p) + " (not older)");
    if (!exists(generation_dir(dir, p)))
      return make_error(ENOENT, "generation " + std::to_string(g) + " needs generation " +
                                    std::to_string(p) + ", which is missing from " + dir);
    CKPT_ASSIGN(const SnapshotReader* parent,
                v.get(member_dir(generation_dir(dir, p), pid, root), p));
    CKPT_TRY(check_parent_link(*child, *parent));
    if (parent->meta().chain_id != child->meta().chain_id)
      return make_error(EBADMSG,
                        parent->path() + ": belongs to another chain than " + child->path());
    child = parent;
  }
  return {};
}

}  // namespace

Status verify_chains(const std::string& dir, const std::vector<uint64_t>& gens, uint64_t only) {
  if (only && std::find(gens.begin(), gens.end(), only) == gens.end())
    return make_error(ENOENT, "no generation " + std::to_string(only) + " in " + dir);
  Verified v;
  for (uint64_t g : gens) {
    if (only && g != only) continue;
    const std::string gen_dir = generation_dir(dir, g);
    CKPT_ASSIGN(const SnapshotReader* root, v.get(gen_dir, g));
    // Every member a restore of g would read: job.img as the root's
    // metadata binds it, each member as job.img binds it.
    CKPT_ASSIGN(JobMeta job, read_bound_job(*root));
    const pid_t root_pid = job.members[0].pid;
    for (const JobMember& m : job.members) {
      if (m.zombie()) continue;
      const SnapshotReader* top = root;
      if (m.pid != root_pid) {
        CKPT_ASSIGN(top, v.get(member_dir(gen_dir, m.pid, root_pid), g));
        CKPT_TRY(check_member_link(*top, m, root->meta().link.binds_job));
      }
      CKPT_TRY(verify_ancestors(v, dir, gens.size(), g, m.pid, root_pid, top));
    }
  }
  return {};
}

}  // namespace ckpt::image
