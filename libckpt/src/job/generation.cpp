#include "job/generation.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/reader.hpp"
#include "image/store.hpp"

namespace ckpt::job {

namespace {

// Removes a directory the writer made, and what it holds (files, and the
// members' directories one level down).
void remove_tree(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string p = path + "/" + name;
    if (::unlink(p.c_str()) != 0 && errno == EISDIR) remove_tree(p);
  }
  ::closedir(d);
  ::rmdir(path.c_str());
}

}  // namespace

Result<std::unique_ptr<GenerationWriter>> GenerationWriter::create(const std::string& dir,
                                                                   uint64_t generation) {
  std::unique_ptr<GenerationWriter> g(new GenerationWriter);
  g->dir_ = dir;
  g->tmp_ = image::temp_dir_name(dir, generation);
  g->final_ = image::generation_dir(dir, generation);
  if (::mkdir(g->tmp_.c_str(), 0700) != 0) return sys_error("cannot write checkpoint into " + dir);
  return g;
}

GenerationWriter::~GenerationWriter() {
  if (!committed_) remove_tree(tmp_);
}

Status GenerationWriter::commit() {
  CKPT_TRY(image::fsync_dir(tmp_));
  if (::rename(tmp_.c_str(), final_.c_str()) != 0) return sys_error("committing " + final_);
  committed_ = true;
  return image::fsync_dir(dir_);
}

Result<image::JobMeta> read_job_or_root(const std::string& gen_dir) {
  auto job = image::read_job_file(gen_dir);
  if (job.ok() || job.error().code != ENOENT) return job;
  CKPT_ASSIGN(auto root, image::SnapshotReader::open(gen_dir));
  image::JobMeta one;
  one.generation = root->meta().generation;
  one.chain_id = root->meta().chain_id;
  image::JobMember m;
  m.pid = root->meta().process.pid;
  one.members.push_back(m);
  return one;
}

}  // namespace ckpt::job
