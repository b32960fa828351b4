// A job's generations on the migration stream (cr_migrate --tree): every
// file of a committed generation directory (the root's three files, job.img,
// member-PID/ of every other member) sent as it is on disk, and rebuilt in
// the receiver's staging directory, where the generation is opened and
// checked as a whole before the stream may commit it (docs/migration.md).
#pragma once

#include <array>
#include <ckpt/result.hpp>
#include <map>
#include <string>

#include "migrate/protocol.hpp"
#include "util/fd.hpp"

namespace ckpt::migrate {

// Sender: JOB_BEGIN, the files in JOB_FILE frames, JOB_END.
Status send_job_generation(FrameWriter& w, const std::string& gen_dir, uint64_t generation);

// Receiver: the frames of job generations, under the handler's sandbox.
class JobIncoming {
 public:
  JobIncoming(const std::string& staging, uint64_t first_gen)
      : staging_(staging), first_gen_(first_gen) {}
  ~JobIncoming();
  bool started() const { return started_; }
  // The stream continues a chain whose generations up to `last` (of chain
  // `chain_id`) are already in staging: the next one must be last + 1.
  void continue_chain(uint64_t last, const std::array<uint8_t, 16>& chain_id) {
    last_ = last;
    chain_ = chain_id;
  }
  bool in_generation() const { return !tmp_.empty(); }
  // A JOB_* frame; *completed is set to the generation a JOB_END committed
  // into staging (opened and checked), else 0.
  Status on_frame(const Frame& f, uint64_t* completed);

 private:
  Status begin(const Frame& f);
  Status file(const Frame& f);
  Result<uint64_t> end(const Frame& f);

  std::string staging_;
  uint64_t first_gen_, last_ = 0, gen_ = 0;
  bool started_ = false;
  std::array<uint8_t, 16> chain_{};
  std::string tmp_;  // the generation being received
  struct Open {
    UniqueFd fd;
    uint64_t size = 0;
  };
  std::map<std::string, Open> files_;
};

}  // namespace ckpt::migrate
