// A job's generation directory while it is written (members' files in a
// temporary directory, renamed into place as a whole), and reading which
// members a committed generation holds.
#pragma once

#include <ckpt/result.hpp>
#include <memory>
#include <string>

#include "image/job_image.hpp"

namespace ckpt::image {

class GenerationWriter {
 public:
  // DIR/.tmp-GEN-HOST-PID, created (fails if it exists).
  static Result<std::unique_ptr<GenerationWriter>> create(const std::string& dir,
                                                          uint64_t generation);
  // Removes everything written unless committed.
  ~GenerationWriter();
  const std::string& path() const { return tmp_; }
  // fsync of the temporary directory, rename to DIR/gen-NNNNNN, fsync DIR
  // (the rename alone with !durable).
  Status commit(bool durable = true);

 private:
  std::string dir_, tmp_, final_;
  bool committed_ = false;
};

// The members of the generation in `gen_dir`: its job.img, or for a
// generation without one (format 1, a job of one) its root's metadata.
Result<image::JobMeta> read_job_or_root(const std::string& gen_dir);

}  // namespace ckpt::image
