// The generation a checkpoint continues (an incremental's parent) or takes
// hints from (a full's earlier generation of the same job), member by
// member, checked as a restore would read it.
#pragma once

#include <sys/types.h>

#include <ckpt/result.hpp>
#include <map>
#include <memory>
#include <string>

#include "image/job_image.hpp"
#include "image/reader.hpp"

namespace ckpt::job {

struct PreviousJob {
  image::JobMeta job;
  std::map<pid_t, std::unique_ptr<image::SnapshotReader>> members;
  const image::SnapshotReader* root() const { return members.at(job.members[0].pid).get(); }
};

// The members of the committed generation in `gen_dir`, with the links
// that bind them (job.img to the root, each member to job.img) checked.
Result<PreviousJob> open_previous(const std::string& gen_dir);

}  // namespace ckpt::job
